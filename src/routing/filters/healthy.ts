import type { Filter, ReplicaView } from '../types.js';

const serving = (r: ReplicaView) => r.up && !r.draining;

/** Keeps replicas that are up and not draining (the same list when all are: no copy per request). */
export const healthyFilter: Filter = {
  name: 'healthy',
  apply: (_ctx, candidates) => (candidates.every(serving) ? candidates : candidates.filter(serving)),
};
