import type { Filter } from '../types.js';

/** Keeps replicas that serve the requested model; a replica whose model list is unknown is kept. */
export const modelFilter: Filter = {
  name: 'model',
  apply: (ctx, candidates) => {
    const model = ctx.identity.model;
    if (model === null) return candidates;
    return candidates.filter((r) => r.models === null || r.models.has(model));
  },
};
