import type { StrategyName } from '../config/schema.js';
import type { AffinityPickerDeps } from './pickers/affinity.js';
import { createAffinityPicker } from './pickers/affinity.js';
import { healthyFilter } from './filters/healthy.js';
import { modelFilter } from './filters/model.js';
import { notFailedFilter } from './filters/not-failed.js';
import { createLeastLoadedPicker } from './pickers/least-loaded.js';
import { createRoundRobinPicker } from './pickers/round-robin.js';
import { createSessionHashPicker } from './pickers/session-hash.js';
import { adapterSlotScorer } from './scorers/adapter-slot.js';
import { loadScorer } from './scorers/load.js';
import { prefixMatchScorer } from './scorers/prefix-match.js';
import { sessionPinScorer } from './scorers/session-pin.js';
import { createShortlist } from './shortlist.js';
import type { Composition } from './types.js';

/**
 * Every strategy, declared in one place. `affinity` is warmroute; the others are the baselines it
 * is benchmarked against: `session-hash` (consistent-hash ring on the session key, no load bound:
 * nginx, HAProxy, production-stack), `round-robin`, `least-loaded`. Only `affinity` sends a request
 * that continues a stored response (Responses API) to the replica holding it: the baselines route
 * it like any other, as the gateways they stand for do.
 */
export function compose(strategy: StrategyName, d: AffinityPickerDeps): Composition {
  const serving = [healthyFilter, modelFilter];
  switch (strategy) {
    case 'affinity': return {
      filters: [...serving, notFailedFilter],
      scorers: [
        { scorer: sessionPinScorer, weight: d.options.weights.sessionPin },
        { scorer: prefixMatchScorer, weight: d.options.weights.prefixMatch },
        { scorer: loadScorer, weight: d.options.weights.load },
        { scorer: adapterSlotScorer, weight: d.options.weights.adapterSlot },
      ],
      picker: createAffinityPicker(d),
      learns: true,
      stateful: true,
      shortlist: createShortlist(d.traffic, () => d.options.prefixTtlMs),
    };
    case 'session-hash': return { filters: serving, scorers: [], picker: createSessionHashPicker(d.options), learns: false, stateful: false };
    case 'round-robin': return { filters: serving, scorers: [], picker: createRoundRobinPicker(), learns: false, stateful: false };
    case 'least-loaded': return { filters: serving, scorers: [], picker: createLeastLoadedPicker(d.random), learns: false, stateful: false };
  }
}
