import { depthOf, weightOf } from '../load.js';
import type { Scorer } from '../types.js';

/**
 * (1 − depth / deepest) × (1 − KV usage): 1 for an idle replica with an empty cache, 0 for the
 * busiest one or for a full cache. Depth is weighted, so a replica of weight 2 with 4 requests
 * scores like one of weight 1 with 2. KV usage matters apart from depth: near 100% vLLM preempts
 * running requests and evicts cached prefixes, so a warm prefix there is worth less.
 */
export const loadScorer: Scorer = {
  name: 'load',
  score(ctx, candidates) {
    // Against the whole fleet's deepest queue, when the candidates are a shortlist of it.
    let deepest = ctx.fleet?.deepest ?? 0;
    if (ctx.fleet === undefined) for (const r of candidates) deepest = Math.max(deepest, depthOf(r) / weightOf(r));
    return candidates.map((r) => {
      const queue = deepest > 0 ? 1 - depthOf(r) / weightOf(r) / deepest : 1;
      return queue * (1 - Math.min(1, Math.max(0, r.kvUsage)));
    });
  },
};
