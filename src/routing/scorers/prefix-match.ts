import type { Scorer } from '../types.js';

/** The share of the prompt each candidate is believed to hold warm (the context's `warm`). */
export const prefixMatchScorer: Scorer = {
  name: 'prefix-match',
  score(ctx, candidates) {
    const total = ctx.identity.promptTokens;
    return candidates.map((r) => (total > 0 ? Math.min(1, (ctx.warm.get(r.name) ?? 0) / total) : 0));
  },
};
