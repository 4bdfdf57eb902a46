import type { RoutingOptions } from '../../config/schema.js';
import { createRingRanker } from '../ring.js';
import type { Picker } from '../types.js';
import { createRoundRobinPicker } from './round-robin.js';

/**
 * Baseline: what nginx `hash $http_x_session_id consistent`, HAProxy and vLLM production-stack's
 * session router do. A keyed session goes to its key's owner on a consistent-hash ring, however
 * loaded; no prefix knowledge, no cost model. Requests without a key rotate (`round-robin`) or,
 * with `sessionHashKeyless: first-turn`, hash the first user turn.
 */
export function createSessionHashPicker(o: Pick<RoutingOptions, 'ringVnodes' | 'sessionHashKeyless'>): Picker {
  const ring = createRingRanker(o.ringVnodes);
  const rotate = createRoundRobinPicker();
  return {
    name: 'session-hash',
    pick(ctx, c, scores) {
      const id = ctx.identity;
      const key = id.sessionKey ?? (o.sessionHashKeyless === 'first-turn' ? id.placementKey : null);
      if (key === null) return rotate.pick(ctx, c, scores);
      return { ranked: ring.rank(key, c), reason: 'hash', matchedTokens: 0 };
    },
  };
}
