import { createCostModel } from '../cost-model.js';
import { healthyFilter } from '../filters/healthy.js';
import { modelFilter } from '../filters/model.js';
import { runningOf } from '../load.js';
import type { RoutingOptions } from '../options.js';
import { pickAffinity, type PickCandidate } from '../pickers/affinity.js';
import { loadCaps } from '../pickers/bounded-load.js';
import { filterCandidates, scoreCandidates, type WeightedScorer } from '../pipeline.js';
import { createPrefixIndex } from '../prefix-index.js';
import { createTraffic, trafficRoom } from '../traffic.js';
import { loadScorer } from '../scorers/load.js';
import { createPrefixMatchScorer } from '../scorers/prefix-match.js';
import { createSessionPinScorer } from '../scorers/session-pin.js';
import type { RequestIdentity, RouteRequest, Router } from '../types.js';
import type { SessionStore } from '../../store/types.js';

/** What route() saw of the replica that will serve, kept until served() feeds the cost model. */
interface Seen {
  readonly matched: number;
  readonly waiting: number;
  readonly running: number;
}

const NO_MATCH: ReadonlyMap<string, number> = new Map();

// Keyless conversations remembered for hysteresis; past this the oldest are forgotten first.
const MAX_KEYLESS_MOVES = 100_000;

/**
 * When each keyless conversation (by placement key) last changed replica. A keyed session's pin
 * carries this (`since`); without it a keyless conversation could be moved by the cost model and
 * moved straight back on its next request, which the voice benchmark caught doing.
 */
function createMoveLog(max: number) {
  const moves = new Map<string, { replica: string; since: number }>();
  return {
    since(key: string, replica: string): number | null {
      const m = moves.get(key);
      return m !== undefined && m.replica === replica ? m.since : null;
    },
    served(key: string, replica: string, t: number): void {
      const m = moves.get(key);
      moves.delete(key);
      moves.set(key, m !== undefined && m.replica === replica ? m : { replica, since: t });
      if (moves.size > max) moves.delete(moves.keys().next().value as string);
    },
    forgetReplica(replica: string): void {
      for (const [k, m] of moves) if (m.replica === replica) moves.delete(k);
    },
  };
}

/**
 * warmroute's strategy: filters (healthy, serves the model) → scorers (session pin, prefix match,
 * load) → the min-estimated-TTFT picker with bounded load and hysteresis (pickers/affinity.ts).
 * Reasons: `pinned` (the session's replica), `prefix` (the replica holding a keyless session's
 * conversation), `placed` (a fresh placement by rendezvous), `spill` (moved off its replica by
 * the hard cap or the cost model, then re-pinned there), `failover` (its pinned replica is gone).
 *
 * served() is where routing learns: the prefix index records the chain on the replica, the pin
 * follows the session, and the cost model gets (uncached tokens, queue) → observed TTFT.
 */
export function createAffinityRouter(store: SessionStore, now: () => number, random: () => number, o: RoutingOptions): Router {
  const filters = [healthyFilter, modelFilter];
  const index = createPrefixIndex({ maxEntries: o.prefixMaxEntries, ttlMs: o.prefixTtlMs });
  const cost = createCostModel(o.prior, o.costForgetting);
  const seen = new WeakMap<RequestIdentity, Map<string, Seen>>();
  const keylessMoves = createMoveLog(MAX_KEYLESS_MOVES);
  const traffic = createTraffic(o.trafficHalfLifeMs);

  // The scorers read what route() looked up for the request being routed (route is synchronous).
  let current: RouteRequest | null = null;
  let pinned: string | null = null;
  let matches: ReadonlyMap<string, number> = NO_MATCH;
  const scorers: WeightedScorer[] = [
    { scorer: createSessionPinScorer((req) => (req === current ? pinned : null)), weight: o.weights.sessionPin },
    { scorer: createPrefixMatchScorer((req) => (req === current ? matches : NO_MATCH)), weight: o.weights.prefixMatch },
    { scorer: loadScorer, weight: o.weights.load },
  ];

  return {
    strategy: 'affinity',

    route(req) {
      const t = now();
      const id = req.identity;
      const candidates = filterCandidates(req, filters);
      // Capacity is in the replica's tokens, the index counts estimated ones: close enough for a
      // bound whose job is to forget the oldest links once a replica has surely evicted them.
      for (const r of candidates) index.setCapacity(r.name, r.kvCapacityTokens);

      const pin = id.sessionKey === null ? null : store.get(id.sessionKey, t);
      const pinIdx = pin === null ? -1 : candidates.findIndex((r) => r.name === pin.replica);
      const m = id.chain.length > 0 ? index.match(id.chain, id.chainTokens, t) : new Map<string, number>();
      // A pin may come from another gateway through a shared store, unknown to this index: its
      // recorded warm prefix counts while the replica would still hold it.
      if (pin !== null && pinIdx >= 0 && t - pin.lastSeen <= o.prefixTtlMs) {
        const warm = Math.min(pin.warmTokens, id.promptTokens);
        if (warm > (m.get(pin.replica) ?? 0)) m.set(pin.replica, warm);
      }

      let home = pinIdx;
      if (home < 0 && id.sessionKey === null) {
        // A keyless conversation's home: the replica holding the most of it, if that is more than
        // the system prompt every conversation shares. A keyed session without a pin is placed by
        // its key instead, never by this gateway's local history, so that every gateway places it
        // the same way.
        let best = id.sharedTokens ?? 0;
        for (let i = 0; i < candidates.length; i++) {
          const got = m.get(candidates[i].name) ?? 0;
          if (got > best) {
            best = got;
            home = i;
          }
        }
      }

      current = req;
      pinned = pinIdx >= 0 ? candidates[pinIdx].name : null;
      matches = m;
      const scored = scoreCandidates(req, candidates, scorers);
      current = null;
      matches = NO_MATCH;

      const picks: PickCandidate[] = candidates.map((r, i) => {
        const matched = m.get(r.name) ?? 0;
        return {
          replica: r,
          matched,
          estimateMs: cost.estimate(r.name, id.promptTokens - matched, r.waiting, runningOf(r)),
          bonusMs: o.scoreMs * scored[i].score,
        };
      });
      const pick = pickAffinity({
        candidates: picks,
        caps: loadCaps(candidates, o.loadFactor, o.hardCapFactor, o.hardCapMin),
        // A keyed session's first placement ignores this gateway's traffic history, so that
        // every gateway places it the same way; keyless placements and spills use it.
        room: home < 0 && id.sessionKey !== null ? candidates.map(() => true) : trafficRoom(candidates, traffic, t, o.loadFactor),
        home,
        homeReason: pinIdx >= 0 ? 'pinned' : 'prefix',
        pinLost: pin !== null && pinIdx < 0,
        coolingDown: pin !== null
          ? pinIdx >= 0 && t - pin.since < o.spillCooldownMs
          : home >= 0 && id.placementKey !== null && t - (keylessMoves.since(id.placementKey, candidates[home].name) ?? -Infinity) < o.spillCooldownMs,
        placementKey: id.sessionKey ?? id.placementKey,
        tieMs: o.tieMs,
        random,
      });

      const notes = new Map<string, Seen>();
      for (const p of picks) notes.set(p.replica.name, { matched: p.matched, waiting: p.replica.waiting, running: runningOf(p.replica) });
      seen.set(id, notes);
      return { ranked: pick.ranked, reason: pick.reason, matchedTokens: pick.chosen.matched, estimatedTtftMs: pick.chosen.estimateMs };
    },

    // `identity` must be the object route() was given: what route() saw of each replica (warm
    // tokens, queue) is looked up by it for the cost model. A copy still records and pins.
    served(identity, outcome) {
      if (!outcome.ok) return;
      const t = now();
      index.record(identity.chain, identity.chainTokens, outcome.replica, t);
      traffic.served(outcome.replica, t);
      if (identity.sessionKey !== null) store.pin(identity.sessionKey, outcome.replica, identity.promptTokens, t);
      else if (identity.placementKey !== null) keylessMoves.served(identity.placementKey, outcome.replica, t);
      if (outcome.promptTokens !== null) cost.observeTokens(identity.promptTokens, outcome.promptTokens);
      if (outcome.upstreamTtftMs === null) return;
      const s = seen.get(identity)?.get(outcome.replica);
      const exact = outcome.promptTokens !== null && outcome.cachedTokens !== null;
      const uncached = exact
        ? (outcome.promptTokens as number) - (outcome.cachedTokens as number)
        : identity.promptTokens - (s?.matched ?? 0);
      cost.observe(outcome.replica, uncached, exact, s?.waiting ?? 0, s?.running ?? 0, outcome.upstreamTtftMs);
    },

    session(key) {
      const t = now();
      const info = store.get(key, t);
      if (info === null) return null;
      // Past the prefix TTL the replica has most likely evicted the conversation: nothing is warm.
      return t - info.lastSeen > o.prefixTtlMs ? { ...info, warmTokens: 0 } : info;
    },
    unpin: (key) => store.unpin(key),
    pinsByReplica: () => store.countsByReplica(now()),
    forgetReplica: (replica) => {
      index.forgetReplica(replica);
      keylessMoves.forgetReplica(replica);
      traffic.forget(replica);
    },
    stats: () => ({
      prefixEntries: index.size(),
      prefixTokensByReplica: index.tokensByReplica(),
      costByReplica: cost.snapshot(),
      tokenScale: cost.tokenScale(),
    }),
  };
}
