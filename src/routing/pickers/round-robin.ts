import type { Picker } from '../types.js';

/** Baseline: each candidate in turn, ignoring sessions and caches. */
export function createRoundRobinPicker(): Picker {
  let next = 0;
  return {
    name: 'round-robin',
    pick(_ctx, c) {
      const start = next++ % c.length;
      return { ranked: [...c.slice(start), ...c.slice(0, start)], reason: 'round-robin', matchedTokens: 0 };
    },
  };
}
