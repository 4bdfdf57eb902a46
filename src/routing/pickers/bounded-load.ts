import { depthOf, weightOf } from '../load.js';
import type { ReplicaView } from '../types.js';

/**
 * Consistent hashing with bounded loads (Mirrokni, Thorup, Zadimoghaddam 2018): with M requests
 * in flight over replicas of total weight W, replica r may hold at most ⌈c · (M + 1) · w_r / W⌉
 * once the new request is counted. No replica then exceeds c × the (weighted) average, and a key
 * only leaves its first choice when that choice is full, so placements stay as stable as the load
 * allows.
 */
export interface LoadCaps {
  /** depthOf() per candidate, same order. */
  readonly depth: readonly number[];
  /** Bound for new placements and spill targets (factor c). */
  readonly soft: readonly number[];
  /** Bound a session's own replica may reach before the session is moved. */
  readonly hard: readonly number[];
}

/**
 * `fleet`: the sums over every candidate when `candidates` is a shortlist of them (shortlist.ts),
 * so that the caps are the whole fleet's.
 */
export function loadCaps(
  candidates: readonly ReplicaView[],
  loadFactor: number,
  hardCapFactor: number,
  hardCapMin: number,
  fleet?: { readonly depth: number; readonly weight: number },
): LoadCaps {
  const depth = candidates.map(depthOf);
  let total = fleet?.depth ?? 0;
  let weight = fleet?.weight ?? 0;
  if (fleet === undefined) {
    for (let i = 0; i < candidates.length; i++) {
      total += depth[i];
      weight += weightOf(candidates[i]);
    }
  }
  const share = (i: number) => ((total + 1) * weightOf(candidates[i])) / weight;
  return {
    depth,
    soft: candidates.map((_, i) => Math.ceil(loadFactor * share(i))),
    hard: candidates.map((r, i) => Math.max(Math.ceil(hardCapMin * weightOf(r)), Math.ceil(hardCapFactor * share(i)))),
  };
}

/** Whether candidate i can take one more request under `cap`. */
export function fits(caps: LoadCaps, cap: readonly number[], i: number): boolean {
  return caps.depth[i] + 1 <= cap[i];
}
