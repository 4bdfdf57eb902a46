import type { SessionStore } from '../store/types.js';
import { resolveRoutingOptions, type RoutingOptionsInput } from './options.js';
import type { Router } from './types.js';
import { createAffinityRouter } from './strategies/affinity.js';
import { createLeastLoadedRouter } from './strategies/least-loaded.js';
import { createRoundRobinRouter } from './strategies/round-robin.js';
import { createSessionHashRouter } from './strategies/session-hash.js';

/**
 * `affinity` is warmroute; the others are the baselines it is benchmarked against:
 * `session-hash` (consistent-hash ring on the session key, no load bound: nginx, HAProxy,
 * production-stack), `round-robin`, `least-loaded`.
 */
export const STRATEGIES = ['affinity', 'session-hash', 'round-robin', 'least-loaded'] as const;
export type Strategy = (typeof STRATEGIES)[number];

export interface RouterDeps {
  readonly store: SessionStore;
  readonly now?: () => number;
  readonly random?: () => number;
  /** Routing knobs; see options.ts for each one's meaning and default. Checked here (throws on nonsense). */
  readonly options?: RoutingOptionsInput;
}

export function createRouter(strategy: Strategy, deps: RouterDeps): Router {
  const now = deps.now ?? Date.now;
  const random = deps.random ?? Math.random;
  const options = resolveRoutingOptions(deps.options);
  switch (strategy) {
    case 'affinity': return createAffinityRouter(deps.store, now, random, options);
    case 'session-hash': return createSessionHashRouter(deps.store, now, options);
    case 'round-robin': return createRoundRobinRouter(deps.store, now);
    case 'least-loaded': return createLeastLoadedRouter(deps.store, now, random);
  }
}
