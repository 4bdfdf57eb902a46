import type { RouteRequest, Scorer } from '../types.js';

/**
 * 1 for the replica the request's session is pinned to, 0 elsewhere. The pin is looked up once per
 * request by the strategy (a store read), so the scorer is handed a reader instead of the store.
 */
export function createSessionPinScorer(pinnedReplica: (req: RouteRequest) => string | null): Scorer {
  return {
    name: 'session-pin',
    score(req, candidates) {
      const out = new Map<string, number>();
      const pinned = pinnedReplica(req);
      for (const r of candidates) out.set(r.name, r.name === pinned ? 1 : 0);
      return out;
    },
  };
}
