import type { RouteRequest, Scorer } from '../types.js';

/**
 * Matched prefix / total prefix: the share of the prompt each replica is believed to hold warm,
 * from the prefix index's longest match. The index is queried once per request by the strategy.
 */
export function createPrefixMatchScorer(matchedTokens: (req: RouteRequest) => ReadonlyMap<string, number>): Scorer {
  return {
    name: 'prefix-match',
    score(req, candidates) {
      const out = new Map<string, number>();
      const total = req.identity.promptTokens;
      const matches = matchedTokens(req);
      for (const r of candidates) {
        const m = matches.get(r.name) ?? 0;
        out.set(r.name, total > 0 ? Math.min(1, m / total) : 0);
      }
      return out;
    },
  };
}
