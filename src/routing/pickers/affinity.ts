import type { RoutingOptions } from '../../config/schema.js';
import type { CostModel } from '../cost-model.js';
import { runningOf } from '../load.js';
import { placeByCapacity, placeForGrowth, type Placement } from '../placement.js';
import { rendezvousRank } from '../rendezvous.js';
import { trafficRoom, type Traffic } from '../traffic.js';
import type { Picker, ReplicaView, RouteContext, RouteReason } from '../types.js';
import { agentOfPlacement, WARM_AGENT, type WorkingSet } from '../working-set.js';
import { fits, loadCaps, type LoadCaps } from './bounded-load.js';
import { RANKED_MAX } from '../shortlist.js';
import { cheapestByCost, rankCheapest } from './min-ttft.js';
import { adapterPlaced } from './adapter-placement.js';
import type { PickCandidate, PickInput } from './pick-input.js';

export interface PickResult {
  readonly ranked: ReplicaView[];
  readonly reason: RouteReason;
  readonly chosen: PickCandidate;
  /** The chosen replica is one where its adapter waits for a LoRA slot. */
  readonly slotWait: boolean;
}

/**
 * The affinity decision, one rule with two guards. The rule: the replica with the least
 * estimated TTFT minus its scorer bonus (so a warm cache keeps a session where it is exactly as
 * long as it is worth more than the queue it waits in). The guards: bounded load — nothing lands
 * on a replica past c × average unless it is the session's own replica, which may go up to the
 * hard cap — and hysteresis — a session's own replica carries the pin bonus, and a session that
 * just moved does not move again for cost reasons until its cooldown ends.
 *
 * Without a home (a new session, or a keyless one whose only match is the shared system prompt),
 * the placement is decided from the working sets when every candidate's KV capacity is known:
 * once the caches cannot hold every agent on every replica, by capacity (placement.ts
 * placeByCapacity: with its agent, where its working set fits; `capacity` when it cannot be),
 * before that for the sessions' growth (placeForGrowth: even session counts, each agent's sessions
 * together within a slack). The working sets count every gateway's sessions when they share a
 * store (its activity channel), so gateways agree on first placements, up to what the channel has
 * not yet carried (a batch interval). With a capacity unknown and no pressure, it is the
 * rendezvous order of its key among the replicas under the soft cap: every gateway computes the
 * same placement for the same conversation with no shared state.
 */
export function pickAffinity(p: PickInput): PickResult {
  const { candidates: c, caps, home } = p;
  const cost = c.map((x) => x.estimateMs - x.bonusMs);
  const anyRoom = p.room.some((x, i) => x && fits(caps, caps.soft, i));
  // A new placement or a spill target: under the in-flight bound, and under the traffic bound
  // while some candidate is.
  const soft = (i: number) => fits(caps, caps.soft, i) && (!anyRoom || p.room[i]);
  const hard = (i: number) => fits(caps, caps.hard, i);
  const cheapest = (allowed: (i: number) => boolean) => cheapestByCost(cost, allowed, p.tieMs, p.random);

  let chosen: number;
  let reason: RouteReason;
  if (home >= 0) {
    const away = (i: number) => i !== home;
    if (hard(home)) {
      const spillOk = p.spillOk ?? (() => true);
      const best = p.coolingDown ? -1 : cheapest((i) => away(i) && soft(i) && spillOk(i));
      chosen = best >= 0 && cost[best] < cost[home] - p.tieMs ? best : home;
    } else {
      // Over the hard cap: move, to the cheapest replica with room, else the least full one.
      chosen = cheapest((i) => away(i) && soft(i));
      if (chosen < 0) chosen = cheapest((i) => away(i) && hard(i));
      if (chosen < 0) chosen = leastFull(caps, c);
    }
    reason = chosen === home ? p.homeReason : 'spill';
    // Moved off a replica where it would have waited for a LoRA slot, to one where it does not.
    if (chosen !== home && p.adapter && p.adapter.wait[home] > 0 && p.adapter.wait[chosen] === 0) reason = 'adapter';
  } else if ((chosen = adapterPlaced(p, soft, hard)) >= 0) {
    reason = 'adapter';
  } else if (p.byCapacity && p.byCapacity.index >= 0) {
    chosen = p.byCapacity.index;
    reason = p.byCapacity.reason;
  } else {
    const open: ReplicaView[] = [];
    for (let i = 0; i < c.length; i++) if (soft(i)) open.push(c[i].replica);
    if (p.placementKey !== null && open.length > 0) {
      const first = rendezvousRank(p.placementKey, open)[0];
      chosen = c.findIndex((x) => x.replica === first);
    } else {
      chosen = cheapest(open.length > 0 ? soft : () => true);
    }
    reason = 'placed';
  }
  if (p.pinLost) reason = 'failover';

  const rest = rankCheapest(cost, (i) => i !== chosen, 0, p.random, RANKED_MAX - 1);
  const ranked = [c[chosen].replica];
  for (const i of rest) ranked.push(c[i].replica);
  return { ranked, reason, chosen: c[chosen], slotWait: p.adapter != null && p.adapter.wait[chosen] > 0 };
}

/** The candidate with the most room left under its hard cap (relative to that cap). */
function leastFull(caps: LoadCaps, c: readonly PickCandidate[]): number {
  let best = 0;
  for (let i = 1; i < c.length; i++) {
    if (caps.depth[i] / caps.hard[i] < caps.depth[best] / caps.hard[best]) best = i;
  }
  return best;
}

/** What the affinity picker reads besides the request: the router's learned state and its knobs. */
export interface AffinityPickerDeps {
  readonly options: RoutingOptions;
  readonly cost: CostModel;
  readonly traffic: Traffic;
  readonly random: () => number;
  /** Each replica's estimated working set (the router keeps it). */
  readonly workingSet: WorkingSet;
}

/**
 * warmroute's picker. From the context it works out the session's home — its pin, else (keyless)
 * the replica holding the most of the conversation beyond the shared system prompt — each
 * candidate's estimated TTFT (cost model: its uncached tokens and its queue) less its scorer bonus,
 * the load caps and the cooldown, and hands them to pickAffinity.
 */
export function createAffinityPicker(d: AffinityPickerDeps): Picker {
  const o = d.options;

  /**
   * A fresh placement by capacity: under KV pressure by the working sets against the capacities,
   * else, when every candidate's capacity is known, for the sessions' growth; null when a
   * capacity is unknown and every cache can hold every agent.
   */
  function byCapacity(ctx: RouteContext, candidates: readonly ReplicaView[], caps: LoadCaps): Placement | null {
    const t = ctx.now;
    const scale = d.cost.tokenScale();
    const capacity = candidates.map((r) => (r.kvCapacityTokens !== null && r.kvCapacityTokens > 0 ? r.kvCapacityTokens : Infinity));
    const ws = d.workingSet;
    if (ctx.pressured === undefined) return null;
    const agent = agentOfPlacement(ctx.identity, ctx.warm);
    if (!ctx.pressured(candidates)) {
      if (!capacity.every(Number.isFinite)) return null;
      return placeForGrowth({
        candidates,
        sets: candidates.map((r) => ws.of(r.name, t)),
        agent: agent?.key ?? null,
        warm: agent !== null && agent.key.startsWith(WARM_AGENT) ? candidates.map((r) => (ctx.warm.get(r.name) ?? 0) >= agent.tokens) : undefined,
        loadOk: candidates.map((_, i) => fits(caps, caps.soft, i)),
        homeLoadOk: candidates.map((_, i) => fits(caps, caps.hard, i)),
      });
    }
    // What the session will grow to is unknown at its first turn: the active sessions' mean
    // stands for it.
    const own = Math.max(ctx.identity.promptTokens - (agent?.tokens ?? 0), ws.meanOwnTokens(t)) * scale;
    // Placement reads which agents a replica holds, not their tokens: they are left unscaled.
    const sets = candidates.map((r) => {
      const s = ws.of(r.name, t);
      return { tokens: s.tokens * scale, sessions: s.sessions, agents: s.agents };
    });
    return placeByCapacity({
      candidates, sets, capacity,
      loadOk: candidates.map((_, i) => fits(caps, caps.soft, i)),
      homeLoadOk: candidates.map((_, i) => fits(caps, caps.hard, i)),
      agent: agent === null ? null : { key: agent.key, tokens: agent.tokens * scale },
      ownTokens: own,
      indexed: candidates.map((r) => agent !== null && (ctx.warm.get(r.name) ?? 0) >= agent.tokens),
      fill: o.capacityFill,
      loadFactor: o.loadFactor,
      homeLoadFactor: o.hardCapFactor,
    });
  }

  /**
   * Under KV pressure, where a spill may go: a replica whose working set still has room for the
   * request's uncached tokens, or one that overflows already (it evicts anyway). A replica whose
   * working set fits, but would not with this request, is left alone: a request that is cold
   * there would evict what its own sessions will ask for again. Without pressure, anywhere.
   */
  function spillTargets(ctx: RouteContext, candidates: readonly ReplicaView[], picks: readonly PickCandidate[]): boolean[] {
    if (!ctx.pressured!(candidates)) return candidates.map(() => true);
    const scale = d.cost.tokenScale();
    const fill = o.capacityFill;
    return candidates.map((r, i) => {
      if (r.kvCapacityTokens === null || r.kvCapacityTokens <= 0) return true;
      const room = fill * r.kvCapacityTokens;
      const set = d.workingSet.of(r.name, ctx.now).tokens * scale;
      return set > room || set + Math.max(0, ctx.identity.promptTokens - picks[i].matched) * scale <= room;
    });
  }

  return {
    name: 'affinity',
    pick(ctx, candidates, scores) {
      const id = ctx.identity;
      const t = ctx.now;
      const pin = ctx.pin;
      const pinIdx = pin === null ? -1 : candidates.findIndex((r) => r.name === pin.replica);
      let home = pinIdx;
      if (home < 0 && id.sessionKey === null) {
        // A keyed session without a pin is placed by its key instead, never by this gateway's
        // local history, so that every gateway places it the same way.
        let best = id.sharedTokens;
        for (let i = 0; i < candidates.length; i++) {
          const got = ctx.warm.get(candidates[i].name) ?? 0;
          if (got > best) {
            best = got;
            home = i;
          }
        }
      }
      // Keyless, and this gateway knows nothing of the conversation beyond its system prompt:
      // follow where it was last served, as shared by the other gateways.
      const conv = ctx.conversation;
      if (home < 0 && id.sessionKey === null && conv && t - conv.lastSeen <= o.prefixTtlMs) home = candidates.findIndex((r) => r.name === conv.replica);
      const picks: PickCandidate[] = candidates.map((r, i) => {
        const matched = ctx.warm.get(r.name) ?? 0;
        return { replica: r, matched, estimateMs: d.cost.estimate(r.name, id.promptTokens - matched, r.waiting, runningOf(r)), bonusMs: o.scoreMs * scores[i] };
      });
      const avoided = ctx.avoid !== null && !candidates.some((r) => r.name === ctx.avoid);
      let spillOk: ((i: number) => boolean) | undefined;
      if (home >= 0 && ctx.pressured !== undefined) {
        let fitsOrOver: boolean[] | null = null;
        spillOk = (i) => (fitsOrOver ??= spillTargets(ctx, candidates, picks))[i];
      }
      const caps = loadCaps(candidates, o.loadFactor, o.hardCapFactor, o.hardCapMin, ctx.fleet);
      const slots = ctx.adapters;
      const pick = pickAffinity({
        adapter: slots === undefined ? null : {
          place: home < 0 ? { at: candidates.map((r) => slots.place(r)), demand: slots.demand(), loadFactor: o.loadFactor } : null,
          wait: candidates.map((r) => slots.wait(r)),
        },
        candidates: picks,
        caps,
        byCapacity: home < 0 ? byCapacity(ctx, candidates, caps) : null,
        spillOk,
        // A keyed session's first placement ignores this gateway's traffic history, so that
        // every gateway places it the same way; keyless placements and spills use it.
        room: home < 0 && id.sessionKey !== null ? candidates.map(() => true) : trafficRoom(candidates, d.traffic, t, o.loadFactor, ctx.fleet),
        home,
        homeReason: pinIdx >= 0 ? 'pinned' : 'prefix',
        pinLost: (pin !== null && pinIdx < 0) || avoided,
        coolingDown: pin !== null
          ? pinIdx >= 0 && t - pin.since < o.spillCooldownMs
          // A keyless conversation's record is shared by every gateway (store), as a keyed pin is:
          // its `since` is when it came to that replica, whichever gateway moved it.
          : home >= 0 && conv != null && conv.replica === candidates[home].name && t - conv.since < o.spillCooldownMs,
        placementKey: id.sessionKey ?? id.placementKey,
        tieMs: o.tieMs,
        random: d.random,
      });
      const decision = { ranked: pick.ranked, reason: pick.reason, matchedTokens: pick.chosen.matched, estimatedTtftMs: pick.chosen.estimateMs };
      return pick.slotWait ? { ...decision, slotWait: true } : decision;
    },
  };
}
