import { rendezvousRank } from '../rendezvous.js';
import type { ReplicaView, RouteReason } from '../types.js';
import { fits, type LoadCaps } from './bounded-load.js';
import { rankByCost } from './min-ttft.js';

/** What the picker knows of one candidate, computed by the strategy. */
export interface PickCandidate {
  readonly replica: ReplicaView;
  /** Cost model: estimated TTFT on this replica given its warm prefix and queue, ms. */
  readonly estimateMs: number;
  /** scoreMs × the weighted scorer total: how much the scorers favour this replica, ms. */
  readonly bonusMs: number;
  /** Prompt tokens believed warm here. */
  readonly matched: number;
}

export interface PickInput {
  readonly candidates: readonly PickCandidate[];
  readonly caps: LoadCaps;
  /** Per candidate: room under the bound on recent traffic (traffic.ts); new placements and spills honour it when any candidate has room. */
  readonly room: readonly boolean[];
  /** Index of the replica the session is bound to (its pin, else its prefix's holder); −1 for none. */
  readonly home: number;
  readonly homeReason: 'pinned' | 'prefix';
  /** The session's pin names a replica that is no longer a candidate (down, draining, gone). */
  readonly pinLost: boolean;
  /** The session moved to `home` less than the cooldown ago: only the hard cap may move it again. */
  readonly coolingDown: boolean;
  /** Rendezvous key for a fresh placement (session key, else the first-turn placement key). */
  readonly placementKey: string | null;
  readonly tieMs: number;
  readonly random: () => number;
}

export interface PickResult {
  readonly ranked: ReplicaView[];
  readonly reason: RouteReason;
  readonly chosen: PickCandidate;
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
 * the placement is the rendezvous order of its key among the replicas under the soft cap: every
 * gateway computes the same placement for the same conversation with no shared state.
 */
export function pickAffinity(p: PickInput): PickResult {
  const { candidates: c, caps, home } = p;
  const cost = c.map((x) => x.estimateMs - x.bonusMs);
  const anyRoom = p.room.some((x, i) => x && fits(caps, caps.soft, i));
  // A new placement or a spill target: under the in-flight bound, and under the traffic bound
  // while some candidate is.
  const soft = (i: number) => fits(caps, caps.soft, i) && (!anyRoom || p.room[i]);
  const hard = (i: number) => fits(caps, caps.hard, i);
  const cheapest = (allowed: (i: number) => boolean) => rankByCost(cost, allowed, p.tieMs, p.random)[0] ?? -1;

  let chosen: number;
  let reason: RouteReason;
  if (home >= 0) {
    const away = (i: number) => i !== home;
    if (hard(home)) {
      const best = p.coolingDown ? -1 : cheapest((i) => away(i) && soft(i));
      chosen = best >= 0 && cost[best] < cost[home] - p.tieMs ? best : home;
    } else {
      // Over the hard cap: move, to the cheapest replica with room, else the least full one.
      chosen = cheapest((i) => away(i) && soft(i));
      if (chosen < 0) chosen = cheapest((i) => away(i) && hard(i));
      if (chosen < 0) chosen = leastFull(caps, c);
    }
    reason = chosen === home ? p.homeReason : 'spill';
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

  const rest = rankByCost(cost, (i) => i !== chosen, 0, p.random);
  const ranked = [c[chosen].replica];
  for (const i of rest) ranked.push(c[i].replica);
  return { ranked, reason, chosen: c[chosen] };
}

/** The candidate with the most room left under its hard cap (relative to that cap). */
function leastFull(caps: LoadCaps, c: readonly PickCandidate[]): number {
  let best = 0;
  for (let i = 1; i < c.length; i++) {
    if (caps.depth[i] / caps.hard[i] < caps.depth[best] / caps.hard[best]) best = i;
  }
  return best;
}
