import { ConfigSchema } from '../config/schema.js';
import { depthOf, weightOf } from './load.js';
import type { Traffic } from './traffic.js';
import type { FleetLoad, ReplicaView, RouteContext } from './types.js';

/**
 * The longest failover list a decision needs: the forwarder tries at most limits.maxRetries + 1
 * replicas, and the schema bounds maxRetries (config/schema.ts is its one source).
 */
export const RANKED_MAX = (ConfigSchema.properties.limits.properties.maxRetries.maximum as number) + 1;

/**
 * Replicas kept beside the session's own ones, least loaded first: the spill targets and the
 * failover list (RANKED_MAX), with room for the home and its warm replicas to be among them.
 */
export const SHORTLIST_LEAST_LOADED = RANKED_MAX + 1;

/** How often at most a name missing from the position index rebuilds it. */
const REINDEX_MS = 1000;

/** Below this many candidates every one is scored: a shortlist would save nothing. */
export const SHORTLIST_MIN_FLEET = 4 * SHORTLIST_LEAST_LOADED;

export interface Shortlist {
  /** The candidates the scorers and the picker see. */
  readonly candidates: readonly ReplicaView[];
  readonly fleet: FleetLoad;
}

/**
 * What a decision scores, so that its cost stays flat in the size of the fleet. One pass over the
 * filtered candidates sums what the load bounds and the load score compare against (in-flight
 * depth, weight, the deepest queue; recent traffic is kept summed by traffic.ts): the same sums as
 * over every candidate. Then a request that has a replica of its own (its pin, its conversation's
 * replica, a replica holding more of its prompt than the shared system prompt) is decided among
 * that replica, every replica the prefix index or its records say holds part of its prompt, and
 * the SHORTLIST_LEAST_LOADED replicas of least queue depth per weight — equal depths taken from a
 * starting point that moves SHORTLIST_LEAST_LOADED on at each decision, so that the idle replicas
 * of an idle fleet take turns: the spill targets a full scoring would choose among, unless the
 * cost model tells replicas of equal depth apart by more than their queues, and the failover
 * list. A fresh placement (no such replica) sees every candidate: rendezvous and capacity
 * placement must rank the whole fleet for every gateway to agree.
 *
 * Nothing in the pass looks a replica up by name while the candidates are the router's own list
 * (every replica passed the filters): the warm replicas are found through a position index of that
 * list, checked at each use and rebuilt when the list changes.
 */
export function createShortlist(traffic: Traffic, prefixTtlMs: () => number): (ctx: RouteContext, all: readonly ReplicaView[]) => Shortlist {
  let indexed: readonly ReplicaView[] | null = null;
  let indexedLength = -1;
  const position = new Map<string, number>();
  let turn = 0;

  let indexedAt = -Infinity;
  function reindex(all: readonly ReplicaView[], t: number): void {
    position.clear();
    for (let i = 0; i < all.length; i++) position.set(all[i].name, i);
    indexed = all;
    indexedLength = all.length;
    indexedAt = t;
  }

  /**
   * Position of `name` in `all` (the router's list), −1 when it is not there. A name the index
   * does not know (a pin to a replica gone, or one new in a list changed in place) rebuilds it at
   * most once a second, not at every decision.
   */
  function positionOf(all: readonly ReplicaView[], name: string, t: number): number {
    if (indexed !== all || indexedLength !== all.length) reindex(all, t);
    let i = position.get(name);
    if (i !== undefined && all[i]?.name === name) return i;
    // A list changed in place: what the index says is checked, never trusted.
    if (i === undefined && t - indexedAt < REINDEX_MS) return -1;
    reindex(all, t);
    i = position.get(name);
    return i === undefined ? -1 : i;
  }

  return (ctx, all) => {
    const n = all.length;
    const t = ctx.now;
    const id = ctx.identity;
    const pinName = ctx.pin?.replica ?? null;
    const conv = ctx.conversation ?? null;
    // The picker's own rule for a keyless conversation's home (pickers/affinity.ts).
    const keyless = id.sessionKey === null;
    const convName = keyless && conv !== null && t - conv.lastSeen <= prefixTtlMs() ? conv.replica : null;
    const small = n < SHORTLIST_MIN_FLEET;
    // Every replica passed the filters, and traffic counts none but those: its running sum is theirs.
    const whole = all === ctx.replicas && traffic.size() <= n;
    const decay = traffic.decay(t);
    const warm = ctx.warm;
    let depth = 0;
    let weight = 0;
    let deepest = 0;
    let trafficTotal = whole && !small ? traffic.totalRaw() * decay : 0;
    let pinAt = -1;
    let convAt = -1;
    const K = SHORTLIST_LEAST_LOADED;
    // The least loaded so far, as a sorted window of at most K (insertion: K is small).
    const lightIdx: number[] = [];
    const lightLoad: number[] = [];
    const start = small ? 0 : (turn++ * K) % n;
    for (let j = 0; j < n; j++) {
      const i = j + start < n ? j + start : j + start - n;
      const r = all[i];
      const d = depthOf(r);
      const w = weightOf(r);
      depth += d;
      weight += w;
      const per = d / w;
      if (per > deepest) deepest = per;
      if (small || !whole) trafficTotal += traffic.raw(r.name) * decay;
      if (small) continue;
      if (r.name === pinName) pinAt = i;
      if (r.name === convName) convAt = i;
      if (lightIdx.length === K && per >= lightLoad[K - 1]) continue;
      let k = lightIdx.length === K ? K - 1 : lightIdx.length;
      while (k > 0 && lightLoad[k - 1] > per) {
        lightIdx[k] = lightIdx[k - 1];
        lightLoad[k] = lightLoad[k - 1];
        k--;
      }
      lightIdx[k] = i;
      lightLoad[k] = per;
    }
    const fleet: FleetLoad = { all, depth, weight, deepest, traffic: trafficTotal };
    if (small) return { candidates: all, fleet };
    const picked = new Set<number>(lightIdx);
    let homed = pinAt >= 0 || convAt >= 0;
    if (pinAt >= 0) picked.add(pinAt);
    if (convAt >= 0) picked.add(convAt);
    for (const [name, tokens] of warm) {
      const i = whole ? positionOf(all, name, t) : all.findIndex((r) => r.name === name);
      if (i < 0) continue;
      picked.add(i);
      if (keyless && tokens > id.sharedTokens) homed = true;
    }
    if (!homed) return { candidates: all, fleet };
    // In the fleet's order, as a full scoring sees them (ties are broken by position).
    return { candidates: [...picked].sort((a, b) => a - b).map((i) => all[i]), fleet };
  };
}
