import type { Filter } from '../types.js';

/** Keeps replicas that are up and not draining. */
export const healthyFilter: Filter = {
  name: 'healthy',
  apply: (_ctx, candidates) => candidates.filter((r) => r.up && !r.draining),
};
