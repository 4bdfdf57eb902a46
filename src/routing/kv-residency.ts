/**
 * Each replica's engine blocks as its KV events tell them, and which of the gateway's chain links
 * each block ends: the bridge between the index's links (messages, estimated tokens) and vLLM's
 * block hashes, learnt from the events that follow a request rather than by tokenizing it
 * (docs/design-notes.md says why: the hot path does not change at all).
 *
 * Learning: a request served on replica R with exactly P prompt tokens (its usage) ends its prompt
 * in R's block at depth floor(P / blockSize) on the chain of parents. Among the blocks R stored
 * since the request was sent, the one at that depth — when there are several, the one descending
 * from the block the same conversation's earlier link is mapped to — is it. A prompt served wholly
 * from cache stores nothing: then the block at that depth descending from that earlier link is.
 * The request's links are then spread up that block's ancestors by their share of the prompt's
 * tokens. Only blocks of a live stream teach: a stream that lost events may hold blocks already
 * gone.
 *
 * Eviction: a BlockRemoved naming a mapped block makes the index forget its links there. vLLM frees
 * a request's blocks tail first, so a prefix's later blocks always go before its earlier ones and a
 * link's own block is the one to watch.
 *
 * Streams: a replica run data-parallel has one engine (cache, sequence) per rank, and two ranks
 * holding the same prefix publish the same block hash; a block is therefore one (stream, hash).
 *
 * Memory: one budget for the whole fleet, `maxBlocks` (kvEvents.maxBlocks), least recently used
 * (stored, or ending a link of a served prompt) forgotten first whichever replica it is on (its
 * links become estimates again: unmatched()). A
 * block is a slot in flat typed arrays, its hash a 64-bit fingerprint in two uint32 lanes (the
 * decoded key string is not kept), found through an open-addressing table of slot numbers: 60 B per block measured by
 * `npm run bench:kv-events` (2,097,152 blocks over 256 replicas), against ~180 B for the Map of
 * strings to objects it replaces.
 */

import { createBlockSlab, NIL, type BlockSlab } from './kv-blocks.js';
import { learnBlocks, type LearnOutcome, type ReplicaBlocks, type Stream } from './kv-learn.js';

export type { LearnOutcome } from './kv-learn.js';

export type { AllBlocksCleared, BlockKey, BlockRemoved, BlockStored, KvEvent } from './kv-event-types.js';
import type { KvEvent } from './kv-event-types.js';

export interface KvResidencyHooks {
  /** The replica evicted the blocks these links ended on. */
  lost(replica: string, links: readonly string[]): void;
  /** The replica's cache was cleared (AllBlocksCleared). */
  cleared(replica: string): void;
  /** These links were matched to engine blocks of a live stream: the events now say when they go. */
  matched?(replica: string, links: readonly string[]): void;
  /** The budget forgot the blocks these links were matched to (not an eviction): estimates again. */
  unmatched?(replica: string, links: readonly string[]): void;
}

export interface KvResidency {
  apply(replica: string, events: readonly KvEvent[], now: number, rank?: number): void;
  /**
   * The stream's events can (true) or can no longer (false) be trusted to name every removal.
   * Off: its blocks are dropped and the links matched to them returned (the caller forgets them).
   */
  setLive(replica: string, rank: number, live: boolean): string[];
  /** The replica (every rank, or one) starts empty: its blocks and their links' mapping go; the links that were matched are returned. */
  reset(replica: string, rank?: number): string[];
  remove(replica: string): void;
  learn(replica: string, chain: readonly string[], chainTokens: readonly number[], promptTokens: number, sentAt: number): LearnOutcome;
  /** Whether some stream of the replica is live. */
  live(replica: string): boolean;
  /** Blocks known resident, links mapped to them. */
  stats(replica: string): { blocks: number; links: number } | null;
  replicas(): string[];
  /** Blocks held over the whole fleet (≤ maxBlocks). */
  size(): number;
}

const RECENT = 4096;

export function createKvResidency(opts: { maxBlocks: number; hooks: KvResidencyHooks }): KvResidency {
  const { hooks } = opts;
  const slab: BlockSlab = createBlockSlab(Math.max(1, Math.floor(opts.maxBlocks)));
  const byReplica = new Map<string, ReplicaBlocks>();
  const streams: (Stream | undefined)[] = [];
  const freeIds: number[] = [];
  /** Slot → the links matched to it (few blocks have any). */
  const slotLinks = new Map<number, string[]>();

  function replicaOf(name: string): ReplicaBlocks {
    let rb = byReplica.get(name);
    if (rb === undefined) byReplica.set(name, (rb = { name, streams: [], linkBlock: new Map() }));
    return rb;
  }

  function streamOf(rb: ReplicaBlocks, rank: number): Stream {
    let st = rb.streams[rank];
    if (st === undefined) {
      const id = freeIds.pop() ?? streams.length;
      st = { id, rank, replica: rb, live: false, blockSize: 0, blocks: 0, recent: new Int32Array(RECENT), recentAt: 0, recentLen: 0, byDepth: new Map() };
      streams[id] = st;
      rb.streams[rank] = st;
    }
    return st;
  }

  function unlinkDepth(st: Stream, s: number): void {
    const p = slab.dPrev[s], n = slab.dNext[s], d = slab.depth[s];
    if (p !== NIL) slab.dNext[p] = n;
    else if (n === NIL) st.byDepth.delete(d);
    else st.byDepth.set(d, n);
    if (n !== NIL) slab.dPrev[n] = p;
  }

  function pushDepth(st: Stream, s: number): void {
    const d = slab.depth[s];
    const head = st.byDepth.get(d) ?? NIL;
    slab.dPrev[s] = NIL;
    slab.dNext[s] = head;
    if (head !== NIL) slab.dPrev[head] = s;
    st.byDepth.set(d, s);
  }

  /** The slot's links lose their mapping; returns them (empty when none). */
  function unmap(rb: ReplicaBlocks, s: number): string[] {
    const links = slotLinks.get(s);
    if (links === undefined) return [];
    slotLinks.delete(s);
    for (const l of links) if (rb.linkBlock.get(l) === s) rb.linkBlock.delete(l);
    return links;
  }

  function drop(st: Stream, s: number): string[] {
    const links = unmap(st.replica, s);
    unlinkDepth(st, s);
    st.blocks--;
    slab.free(s);
    return links;
  }

  // The budget's victim: the fleet's least recently used block (stored, or touched by learn()).
  slab.onEvict = (s) => {
    const st = streams[slab.sid[s]] as Stream;
    const links = unmap(st.replica, s);
    unlinkDepth(st, s);
    st.blocks--;
    if (links.length > 0) hooks.unmatched?.(st.replica.name, links);
  };

  function store(st: Stream, key: string, parent: string | null, now: number): void {
    const old = slab.find(st.id, key);
    if (old !== NIL) {
      slab.storedAt[old] = now;
      slab.touch(old);
      return;
    }
    const p = parent === null ? NIL : slab.find(st.id, parent);
    const depth = parent === null ? 1 : p !== NIL && slab.depth[p] > 0 ? slab.depth[p] + 1 : 0;
    const s = slab.insert(st.id, key, parent, depth, now);
    st.blocks++;
    pushDepth(st, s);
    st.recent[st.recentAt] = s;
    st.recentAt = (st.recentAt + 1) % RECENT;
    if (st.recentLen < RECENT) st.recentLen++;
  }

  function empty(st: Stream): string[] {
    const out: string[] = [];
    for (const head of [...st.byDepth.values()]) {
      for (let s = head; s !== NIL;) {
        const next = slab.dNext[s];
        out.push(...unmap(st.replica, s));
        st.blocks--;
        slab.free(s);
        s = next;
      }
    }
    st.byDepth.clear();
    st.recentLen = 0;
    st.recentAt = 0;
    return out;
  }

  return {
    apply(replica, events, now, rank = 0) {
      const st = streamOf(replicaOf(replica), rank);
      for (const e of events) {
        if (e.type === 'stored') {
          if (e.blockSize !== null && e.blockSize > 0) st.blockSize = e.blockSize;
          let parent = e.parent;
          for (const h of e.hashes) {
            store(st, h, parent, now);
            parent = h;
          }
        } else if (e.type === 'removed') {
          let lost: string[] | null = null;
          for (const h of e.hashes) {
            const s = slab.find(st.id, h);
            if (s === NIL) continue;
            const links = drop(st, s);
            if (links.length > 0) (lost ??= []).push(...links);
          }
          if (lost !== null) hooks.lost(replica, lost);
        } else {
          empty(st);
          hooks.cleared(replica);
        }
      }
    },

    setLive(replica, rank, live) {
      // A stream closed after its replica left: nothing to bring back.
      if (!live && byReplica.get(replica)?.streams[rank] === undefined) return [];
      const st = streamOf(replicaOf(replica), rank);
      st.live = live;
      return live ? [] : empty(st);
    },

    reset(replica, rank) {
      const rb = byReplica.get(replica);
      if (rb === undefined) return [];
      const out: string[] = [];
      for (const st of rb.streams) if (st !== undefined && (rank === undefined || st.rank === rank)) out.push(...empty(st));
      return out;
    },

    remove(replica) {
      const rb = byReplica.get(replica);
      if (rb === undefined) return;
      for (const st of rb.streams) {
        if (st === undefined) continue;
        empty(st);
        streams[st.id] = undefined;
        freeIds.push(st.id);
      }
      byReplica.delete(replica);
    },

    learn(replica, chain, chainTokens, promptTokens, sentAt) {
      const rb = byReplica.get(replica);
      return rb === undefined ? { learned: false, reason: 'unknown_replica' } : learnBlocks({ slab, streams, slotLinks, matched: hooks.matched }, rb, chain, chainTokens, promptTokens, sentAt);
    },

    live(replica) {
      return byReplica.get(replica)?.streams.some((st) => st?.live === true) ?? false;
    },

    stats(replica) {
      const rb = byReplica.get(replica);
      if (rb === undefined) return null;
      let blocks = 0;
      for (const st of rb.streams) blocks += st?.blocks ?? 0;
      return { blocks, links: rb.linkBlock.size };
    },

    replicas: () => [...byReplica.keys()],
    size: () => slab.size(),
  };
}
