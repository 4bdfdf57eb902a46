import type { SessionStore } from '../store/types.js';
import type { Router } from './types.js';
import { createAffinityRouter } from './strategies/affinity.js';
import { createLeastLoadedRouter } from './strategies/least-loaded.js';
import { createRoundRobinRouter } from './strategies/round-robin.js';

export const STRATEGIES = ['affinity', 'round-robin', 'least-loaded'] as const;
export type Strategy = (typeof STRATEGIES)[number];

export interface RouterDeps {
  readonly store: SessionStore;
  readonly now?: () => number;
  readonly random?: () => number;
}

export function createRouter(strategy: Strategy, deps: RouterDeps): Router {
  const now = deps.now ?? Date.now;
  const random = deps.random ?? Math.random;
  switch (strategy) {
    case 'affinity': return createAffinityRouter(deps.store, now, random);
    case 'round-robin': return createRoundRobinRouter(deps.store, now);
    case 'least-loaded': return createLeastLoadedRouter(deps.store, now, random);
  }
}
