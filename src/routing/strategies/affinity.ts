import { filterCandidates } from '../pipeline.js';
import { healthyFilter } from '../filters/healthy.js';
import { modelFilter } from '../filters/model.js';
import { rendezvousRank } from '../rendezvous.js';
import type { Router } from '../types.js';
import type { SessionStore } from '../../store/types.js';
import { sessionAdmin } from './common.js';
import { rankByLoad } from './least-loaded.js';

/**
 * Session affinity: a keyed session goes to its pinned replica while that replica is healthy;
 * a new key is placed by rendezvous hashing (stable across gateways, and losing a replica moves
 * only its own sessions). Requests without a key go to the least-loaded replica.
 */
export function createAffinityRouter(store: SessionStore, now: () => number, random: () => number): Router {
  const filters = [healthyFilter, modelFilter];
  return {
    strategy: 'affinity',
    route(req) {
      const candidates = filterCandidates(req, filters);
      const key = req.identity.sessionKey;
      if (key === null) return { ranked: rankByLoad(candidates, random), reason: 'least-loaded', matchedTokens: 0 };
      const ranked = rendezvousRank(key, candidates);
      const pin = store.get(key, now());
      if (pin === null) return { ranked, reason: 'placed', matchedTokens: 0 };
      const pinned = ranked.findIndex((r) => r.name === pin.replica);
      if (pinned < 0) return { ranked, reason: 'failover', matchedTokens: 0 };
      if (pinned > 0) ranked.unshift(...ranked.splice(pinned, 1));
      return { ranked, reason: 'pinned', matchedTokens: pin.warmTokens };
    },
    served(identity, outcome) {
      if (!outcome.ok || identity.sessionKey === null) return;
      store.pin(identity.sessionKey, outcome.replica, outcome.promptTokens ?? 0, now());
    },
    ...sessionAdmin(store, now),
  };
}
