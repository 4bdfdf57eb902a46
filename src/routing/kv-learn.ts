/**
 * Learning which engine blocks a served request ended in (kv-residency.ts says how), over the
 * blocks of the replica's live streams.
 */

import { ancestor, NIL, parentOf, type BlockSlab } from './kv-blocks.js';

export interface LearnOutcome {
  readonly learned: boolean;
  /** Why not: no block at the prompt's depth stored since, several and none descends from what the conversation had, no events yet. */
  readonly reason: 'learned' | 'none' | 'ambiguous' | 'short' | 'unknown_replica';
}

/** One replica's rank: its own engine, cache and sequence. */
export interface Stream {
  readonly id: number;
  readonly rank: number;
  readonly replica: ReplicaBlocks;
  live: boolean;
  blockSize: number;
  blocks: number;
  /** Slots in the order stored, for learning (a ring; a slot since reused is checked on use). */
  readonly recent: Int32Array;
  recentAt: number;
  recentLen: number;
  /** Depth → first slot of that depth (further through the slab's depth lists). */
  readonly byDepth: Map<number, number>;
}

export interface ReplicaBlocks {
  readonly name: string;
  readonly streams: (Stream | undefined)[];
  /** Link → the slot it is matched to. */
  readonly linkBlock: Map<string, number>;
}

export interface LearnContext {
  readonly slab: BlockSlab;
  readonly streams: readonly (Stream | undefined)[];
  /** Slot → the links matched to it. */
  readonly slotLinks: Map<number, string[]>;
  readonly matched?: (replica: string, links: readonly string[]) => void;
}

export function learnBlocks(ctx: LearnContext, rb: ReplicaBlocks, chain: readonly string[], chainTokens: readonly number[], promptTokens: number, sentAt: number): LearnOutcome {
  const { slab, streams, slotLinks } = ctx;
  const live = rb.streams.filter((st): st is Stream => st !== undefined && st.live && st.blockSize > 0);
  if (live.length === 0) return { learned: false, reason: 'unknown_replica' };
  const n = chain.length;
  // A Set: the ring may hold a slot more than once, and many blocks can share one depth.
  const found = new Set<number>();
  let anyDepth = false;
  for (const st of live) {
    const depth = Math.floor(promptTokens / st.blockSize);
    if (depth === 0) continue;
    anyDepth = true;
    for (let i = 0; i < st.recentLen; i++) {
      const s = st.recent[i];
      if (slab.used(s) && slab.sid[s] === st.id && slab.depth[s] === depth && slab.storedAt[s] >= sentAt) found.add(s);
    }
  }
  if (!anyDepth || n === 0) return { learned: false, reason: 'short' };
  // The conversation's deepest link already mapped here tells which lineage is its own.
  let anchor = NIL;
  for (let i = n - 1; i >= 0 && anchor === NIL; i--) {
    const s = rb.linkBlock.get(chain[i]);
    if (s === undefined || !slab.used(s)) continue;
    const st = streams[slab.sid[s]] as Stream;
    if (st.live && slab.depth[s] > 0 && slab.depth[s] <= Math.floor(promptTokens / st.blockSize)) anchor = s;
  }
  const anchorDepth = anchor === NIL ? 0 : slab.depth[anchor];
  let mine = anchor === NIL ? [...found] : [...found].filter((s) => slab.sid[s] === slab.sid[anchor] && ancestor(slab, s, anchorDepth) === anchor);
  // Nothing new stored (the whole prompt came from cache): the block at that depth of the
  // conversation's own lineage, whenever it was stored.
  if (mine.length === 0 && anchor !== NIL) {
    const st = streams[slab.sid[anchor]] as Stream;
    for (let s = st.byDepth.get(Math.floor(promptTokens / st.blockSize)) ?? NIL; s !== NIL; s = slab.dNext[s]) if (ancestor(slab, s, anchorDepth) === anchor) mine.push(s);
  }
  if (mine.length === 0) return { learned: false, reason: 'none' };
  if (mine.length > 1) return { learned: false, reason: 'ambiguous' };
  // Links spread up the lineage by their share of the prompt (estimated tokens scaled to P).
  const bs = (streams[slab.sid[mine[0]]] as Stream).blockSize;
  const scale = promptTokens / chainTokens[n - 1];
  let b = mine[0];
  const matched: string[] = [];
  for (let i = n - 1; i >= 0 && b !== NIL; i--) {
    const d = Math.floor((chainTokens[i] * scale) / bs);
    if (d <= 0) break;
    while (b !== NIL && slab.depth[b] > d) b = parentOf(slab, b);
    if (b === NIL || slab.depth[b] !== d) break;
    const link = chain[i];
    // A served prompt used this block: the budget keeps it as recently used.
    slab.touch(b);
    const was = rb.linkBlock.get(link);
    if (was === b) continue;
    if (was !== undefined) {
      const wl = slotLinks.get(was);
      if (wl !== undefined) {
        const rest = wl.filter((l) => l !== link);
        if (rest.length > 0) slotLinks.set(was, rest);
        else slotLinks.delete(was);
      }
    }
    rb.linkBlock.set(link, b);
    const at = slotLinks.get(b);
    if (at === undefined) slotLinks.set(b, [link]);
    else at.push(link);
    matched.push(link);
  }
  if (matched.length > 0) ctx.matched?.(rb.name, matched);
  return { learned: true, reason: 'learned' };
}
