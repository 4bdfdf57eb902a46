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
 * depth, weight, the deepest queue, recent traffic: the same sums as over every candidate). Then
 * a request that has a replica of its own (its pin, its conversation's replica, a replica holding
 * more of its prompt than the shared system prompt) is decided among that replica, every replica
 * the prefix index or its records say holds part of its prompt, and the SHORTLIST_LEAST_LOADED
 * replicas least loaded (queue depth per weight, then recent traffic): the only ones a spill
 * could choose that a full scoring would, unless the cost model tells replicas of equal load
 * apart by more than their queues, and the failover list. A fresh placement (no such replica)
 * sees every candidate: rendezvous and capacity placement must rank the whole fleet for every
 * gateway to agree.
 */
export function shortlist(ctx: RouteContext, all: readonly ReplicaView[], traffic: Traffic, prefixTtlMs: number): Shortlist {
  const n = all.length;
  const t = ctx.now;
  const id = ctx.identity;
  const pinName = ctx.pin?.replica ?? null;
  const conv = ctx.conversation ?? null;
  // The picker's own rule for a keyless conversation's home (pickers/affinity.ts).
  const keyless = id.sessionKey === null;
  const convName = keyless && conv !== null && t - conv.lastSeen <= prefixTtlMs ? conv.replica : null;
  const small = n < SHORTLIST_MIN_FLEET;
  const warm = ctx.warm;
  const anyWarm = warm.size > 0;
  let depth = 0;
  let weight = 0;
  let deepest = 0;
  let trafficTotal = 0;
  let homed = false;
  const own: number[] = [];
  // The least loaded so far, as a sorted window of at most K (insertion: K is small).
  const K = SHORTLIST_LEAST_LOADED;
  const lightIdx: number[] = [];
  const lightLoad: number[] = [];
  const lightTraffic: number[] = [];
  const decay = traffic.decay(t);
  for (let i = 0; i < n; i++) {
    const r = all[i];
    const d = depthOf(r);
    const w = weightOf(r);
    const v = traffic.raw(r.name) * decay;
    depth += d;
    weight += w;
    trafficTotal += v;
    const per = d / w;
    if (per > deepest) deepest = per;
    if (small) continue;
    const got = anyWarm ? warm.get(r.name) : undefined;
    if (r.name === pinName || r.name === convName || got !== undefined) {
      own.push(i);
      if (r.name === pinName || (keyless && (r.name === convName || (got ?? 0) > id.sharedTokens))) homed = true;
      continue;
    }
    if (lightIdx.length === K && (per > lightLoad[K - 1] || (per === lightLoad[K - 1] && v >= lightTraffic[K - 1]))) continue;
    let j = lightIdx.length === K ? K - 1 : lightIdx.length;
    while (j > 0 && (lightLoad[j - 1] > per || (lightLoad[j - 1] === per && lightTraffic[j - 1] > v))) {
      lightIdx[j] = lightIdx[j - 1];
      lightLoad[j] = lightLoad[j - 1];
      lightTraffic[j] = lightTraffic[j - 1];
      j--;
    }
    lightIdx[j] = i;
    lightLoad[j] = per;
    lightTraffic[j] = v;
  }
  const fleet: FleetLoad = { all, depth, weight, deepest, traffic: trafficTotal };
  if (small || !homed) return { candidates: all, fleet };
  // In the fleet's order, as a full scoring would see them (ties are broken by position).
  const picked = own.concat(lightIdx).sort((a, b) => a - b);
  return { candidates: picked.map((i) => all[i]), fleet };
}
