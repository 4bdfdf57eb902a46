import type { Filter } from '../types.js';

/**
 * Keeps replicas that serve the requested model; a replica whose model list is unknown is kept.
 * The same list when all serve it: no copy per request.
 */
export const modelFilter: Filter = {
  name: 'model',
  apply: (ctx, candidates) => {
    const model = ctx.identity.model;
    if (model === null) return candidates;
    const loadable = ctx.loadable;
    const serves = (r: (typeof candidates)[number]) => (loadable !== undefined ? loadable(r) : r.models === null || r.models.has(model));
    return candidates.every(serves) ? candidates : candidates.filter(serves);
  },
};
