import { depthOf, weightOf } from '../load.js';
import type { Picker, ReplicaView } from '../types.js';

/** Load as routing sees it everywhere: requests on the replica (see depthOf) per unit of weight. */
export function loadOf(r: ReplicaView): number {
  return depthOf(r) / weightOf(r);
}

/** Baseline: least load first, equal loads in random order; sessions and caches ignored. */
export function createLeastLoadedPicker(random: () => number): Picker {
  return {
    name: 'least-loaded',
    pick(_ctx, c) {
      const ranked = c
        .map((r) => ({ r, load: loadOf(r), tie: random() }))
        .sort((a, b) => a.load - b.load || a.tie - b.tie)
        .map((x) => x.r);
      return { ranked, reason: 'least-loaded', matchedTokens: 0 };
    },
  };
}
