import type { Filter } from '../types.js';

/**
 * Drops the replica the session's previous request broke off on (a stream that died mid-way), so
 * the next turn is placed elsewhere, unless no other replica is left.
 */
export const notFailedFilter: Filter = {
  name: 'not-failed',
  apply: (ctx, candidates) => {
    if (ctx.avoid === null) return candidates;
    const rest = candidates.filter((r) => r.name !== ctx.avoid);
    return rest.length > 0 ? rest : candidates;
  },
};
