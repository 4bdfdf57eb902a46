import { healthyFilter } from '../filters/healthy.js';
import { modelFilter } from '../filters/model.js';
import type { RoutingOptions } from '../options.js';
import { filterCandidates } from '../pipeline.js';
import { createRingRanker } from '../ring.js';
import type { Router } from '../types.js';
import type { SessionStore } from '../../store/types.js';
import { sessionAdmin } from './common.js';

/**
 * Baseline: what nginx `hash $http_x_session_id consistent`, HAProxy and vLLM production-stack's
 * session router do. A keyed session goes to its key's owner on a consistent-hash ring, however
 * loaded; no prefix knowledge, no cost model. Requests without a key rotate (`round-robin`,
 * reason `random`) or, with `sessionHashKeyless: first-turn`, hash the first user turn.
 */
export function createSessionHashRouter(store: SessionStore, now: () => number, o: RoutingOptions): Router {
  const filters = [healthyFilter, modelFilter];
  const ring = createRingRanker(o.ringVnodes);
  let next = 0;
  return {
    strategy: 'session-hash',
    route(req) {
      const candidates = filterCandidates(req, filters);
      const id = req.identity;
      const key = id.sessionKey ?? (o.sessionHashKeyless === 'first-turn' ? id.placementKey : null);
      if (key !== null) return { ranked: ring.rank(key, candidates), reason: 'hash', matchedTokens: 0 };
      const start = next++ % candidates.length;
      return { ranked: [...candidates.slice(start), ...candidates.slice(0, start)], reason: 'random', matchedTokens: 0 };
    },
    served() {},
    ...sessionAdmin(store, now),
  };
}
