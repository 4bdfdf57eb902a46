import { filterCandidates } from '../pipeline.js';
import { healthyFilter } from '../filters/healthy.js';
import { modelFilter } from '../filters/model.js';
import type { Router } from '../types.js';
import type { SessionStore } from '../../store/types.js';
import { sessionAdmin } from './common.js';

/** Baseline: rotate over the healthy replicas, ignoring sessions and caches. */
export function createRoundRobinRouter(store: SessionStore, now: () => number): Router {
  let next = 0;
  const filters = [healthyFilter, modelFilter];
  return {
    strategy: 'round-robin',
    route(req) {
      const c = filterCandidates(req, filters);
      const start = next++ % c.length;
      return { ranked: [...c.slice(start), ...c.slice(0, start)], reason: 'random', matchedTokens: 0 };
    },
    served() {},
    ...sessionAdmin(store, now),
  };
}
