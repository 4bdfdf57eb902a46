import { filterCandidates } from '../pipeline.js';
import { healthyFilter } from '../filters/healthy.js';
import { modelFilter } from '../filters/model.js';
import { depthOf, weightOf } from '../load.js';
import type { ReplicaView, Router } from '../types.js';
import type { SessionStore } from '../../store/types.js';
import { sessionAdmin } from './common.js';

/** Load as routing sees it everywhere: requests on the replica (see depthOf) per unit of weight. */
export function loadOf(r: ReplicaView): number {
  return depthOf(r) / weightOf(r);
}

/** Least load first; equal loads in random order. */
export function rankByLoad(candidates: readonly ReplicaView[], random: () => number): ReplicaView[] {
  return candidates
    .map((r) => ({ r, load: loadOf(r), tie: random() }))
    .sort((a, b) => a.load - b.load || a.tie - b.tie)
    .map((x) => x.r);
}

/** Baseline: the least-loaded healthy replica, ignoring sessions and caches. */
export function createLeastLoadedRouter(store: SessionStore, now: () => number, random: () => number): Router {
  const filters = [healthyFilter, modelFilter];
  return {
    strategy: 'least-loaded',
    route(req) {
      return { ranked: rankByLoad(filterCandidates(req, filters), random), reason: 'least-loaded', matchedTokens: 0 };
    },
    served() {},
    ...sessionAdmin(store, now),
  };
}
