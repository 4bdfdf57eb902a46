import type { Scorer } from '../types.js';

// A request that names no adapter meets no slot anywhere: the same score everywhere, 0, added
// to nothing (one array, grown as the fleet does, read only by the pipeline).
let zeros: number[] = [];

/**
 * 1 where a request for a LoRA adapter meets no slot wait (its adapter runs there, or a slot is
 * free), 0 where every slot holds other adapters with work in flight (routing/adapter-slots.ts).
 * Weighed like the other scorers (weights.adapterSlot × scoreMs of estimated TTFT), so a pinned
 * session leaves its replica for a slot only when the wait costs more than its warm prefix saves.
 */
export const adapterSlotScorer: Scorer = {
  name: 'adapter-slot',
  score(ctx, candidates) {
    const view = ctx.adapters;
    if (view === undefined) {
      if (zeros.length < candidates.length) zeros = new Array<number>(candidates.length).fill(0);
      return zeros;
    }
    return candidates.map((r) => 1 - view.wait(r));
  },
};
