import type { Scorer } from '../types.js';

/** 1 for the replica the request's session is pinned to, 0 elsewhere. */
export const sessionPinScorer: Scorer = {
  name: 'session-pin',
  score(ctx, candidates) {
    const pinned = ctx.pin?.replica ?? null;
    return candidates.map((r) => (r.name === pinned ? 1 : 0));
  },
};
