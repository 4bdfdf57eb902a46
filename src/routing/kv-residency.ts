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
 * from cache stores nothing: then the block at that depth descending from that earlier link is. The request's links are
 * then spread up that block's ancestors by their share of the prompt's tokens.
 *
 * Eviction: a BlockRemoved naming a mapped block makes the index forget its links there. vLLM frees
 * a request's blocks tail first, so a prefix's later blocks always go before its earlier ones and a
 * link's own block is the one to watch.
 *
 * Memory: at most `maxBlocks` blocks per replica (oldest stored dropped first, with their links'
 * mapping; the index entries stay and are bounded by its own limits).
 */

/** vLLM's KV cache events, decoded (src/fleet/kv-events/decode.ts reads them off the wire). */
export type BlockKey = string;

export interface BlockStored {
  readonly type: 'stored';
  readonly hashes: readonly BlockKey[];
  readonly parent: BlockKey | null;
  /**
   * How many token ids the event carried (the ids themselves are not kept: routing learns blocks
   * from their place in the chain, not their tokens); null when absent.
   */
  readonly tokenCount: number | null;
  readonly blockSize: number | null;
  /** "GPU", "CPU" (offload tier), ...; null from releases that had one tier only. */
  readonly medium: string | null;
}

export interface BlockRemoved {
  readonly type: 'removed';
  readonly hashes: readonly BlockKey[];
  readonly medium: string | null;
}

export interface AllBlocksCleared {
  readonly type: 'cleared';
}

export type KvEvent = BlockStored | BlockRemoved | AllBlocksCleared;


export interface KvResidencyHooks {
  /** The replica evicted the blocks these links ended on. */
  lost(replica: string, links: readonly string[]): void;
  /** The replica's cache was cleared (AllBlocksCleared) or its stream restarted. */
  cleared(replica: string): void;
}

export interface LearnOutcome {
  readonly learned: boolean;
  /** Why not: no block at the prompt's depth stored since, several and none descends from what the conversation had, no events yet. */
  readonly reason: 'learned' | 'none' | 'ambiguous' | 'short' | 'unknown_replica';
}

export interface KvResidency {
  apply(replica: string, events: readonly KvEvent[], now: number): void;
  /** The replica's stream restarted or its process did: it starts empty. */
  reset(replica: string): void;
  remove(replica: string): void;
  learn(replica: string, chain: readonly string[], chainTokens: readonly number[], promptTokens: number, sentAt: number): LearnOutcome;
  /** Blocks known resident, links mapped to them. */
  stats(replica: string): { blocks: number; links: number } | null;
  replicas(): string[];
}

interface Block {
  readonly parent: string | null;
  /** 1 for a root block; 0 when its parent is unknown (stored before this gateway listened). */
  readonly depth: number;
  storedAt: number;
  links: string[] | null;
}

interface ReplicaBlocks {
  readonly blocks: Map<string, Block>;
  readonly linkBlock: Map<string, string>;
  /** Stored block keys in the order stored, for learning (a ring). */
  readonly recent: string[];
  recentAt: number;
  /** Block keys by depth: a prompt served wholly from cache stores nothing new to learn from. */
  readonly byDepth: Map<number, Set<string>>;
  blockSize: number;
}

const RECENT = 4096;

export function createKvResidency(opts: { maxBlocks: number; hooks: KvResidencyHooks }): KvResidency {
  const byReplica = new Map<string, ReplicaBlocks>();
  const { hooks } = opts;
  const maxBlocks = Math.max(1, opts.maxBlocks);

  function of(replica: string): ReplicaBlocks {
    let rb = byReplica.get(replica);
    if (rb === undefined) byReplica.set(replica, (rb = { blocks: new Map(), linkBlock: new Map(), recent: [], recentAt: 0, byDepth: new Map(), blockSize: 0 }));
    return rb;
  }

  function drop(rb: ReplicaBlocks, key: string, b: Block): void {
    unmap(rb, b);
    rb.blocks.delete(key);
    const at = rb.byDepth.get(b.depth);
    if (at !== undefined && at.delete(key) && at.size === 0) rb.byDepth.delete(b.depth);
  }

  function empty(rb: ReplicaBlocks): void {
    rb.blocks.clear();
    rb.linkBlock.clear();
    rb.byDepth.clear();
  }

  function unmap(rb: ReplicaBlocks, b: Block): void {
    if (b.links === null) return;
    for (const l of b.links) rb.linkBlock.delete(l);
    b.links = null;
  }

  function store(rb: ReplicaBlocks, key: string, parent: string | null, now: number): void {
    const old = rb.blocks.get(key);
    if (old !== undefined) {
      old.storedAt = now;
      return;
    }
    const p = parent === null ? undefined : rb.blocks.get(parent);
    const depth = parent === null ? 1 : p !== undefined && p.depth > 0 ? p.depth + 1 : 0;
    if (rb.blocks.size >= maxBlocks) {
      const [oldestKey, oldest] = rb.blocks.entries().next().value as [string, Block];
      drop(rb, oldestKey, oldest);
    }
    rb.blocks.set(key, { parent, depth, storedAt: now, links: null });
    if (depth > 0) {
      let at = rb.byDepth.get(depth);
      if (at === undefined) rb.byDepth.set(depth, (at = new Set()));
      at.add(key);
    }
    if (rb.recent.length < RECENT) rb.recent.push(key);
    else rb.recent[rb.recentAt] = key;
    rb.recentAt = (rb.recentAt + 1) % RECENT;
  }

  /**
   * The block's parent, only while the lineage is consistent (one level up). A parent removed and
   * stored again under another parent has another depth; following it could loop for ever (A's
   * parent B, B's parent A), and these walks run on the event loop.
   */
  function parentOf(rb: ReplicaBlocks, b: Block): Block | undefined {
    const p = b.parent === null ? undefined : rb.blocks.get(b.parent);
    return p !== undefined && p.depth === b.depth - 1 ? p : undefined;
  }

  /** The ancestor of `key` at `depth` (the block itself at its own depth). */
  function ancestor(rb: ReplicaBlocks, key: string, depth: number): string | null {
    let k: string | null = key;
    let b = rb.blocks.get(key);
    while (b !== undefined && b.depth > depth) {
      k = b.parent;
      b = parentOf(rb, b);
    }
    return b !== undefined && b.depth === depth ? k : null;
  }

  return {
    apply(replica, events, now) {
      const rb = of(replica);
      for (const e of events) {
        if (e.type === 'stored') {
          if (e.blockSize !== null && e.blockSize > 0) rb.blockSize = e.blockSize;
          let parent = e.parent;
          for (const h of e.hashes) {
            store(rb, h, parent, now);
            parent = h;
          }
        } else if (e.type === 'removed') {
          let lost: string[] | null = null;
          for (const h of e.hashes) {
            const b = rb.blocks.get(h);
            if (b === undefined) continue;
            if (b.links !== null) (lost ??= []).push(...b.links);
            drop(rb, h, b);
          }
          if (lost !== null) hooks.lost(replica, lost);
        } else {
          empty(rb);
          hooks.cleared(replica);
        }
      }
    },

    reset(replica) {
      const rb = byReplica.get(replica);
      if (rb === undefined) return;
      empty(rb);
      rb.recent.length = 0;
      rb.recentAt = 0;
    },

    remove(replica) {
      byReplica.delete(replica);
    },

    learn(replica, chain, chainTokens, promptTokens, sentAt) {
      const rb = byReplica.get(replica);
      if (rb === undefined || rb.blockSize === 0) return { learned: false, reason: 'unknown_replica' };
      const bs = rb.blockSize;
      const depth = Math.floor(promptTokens / bs);
      const n = chain.length;
      if (depth === 0 || n === 0) return { learned: false, reason: 'short' };
      // A Set: the ring may hold a key more than once, and many blocks can share one depth.
      const found = new Set<string>();
      for (const k of rb.recent) {
        const b = rb.blocks.get(k);
        if (b !== undefined && b.depth === depth && b.storedAt >= sentAt) found.add(k);
      }
      const candidates = [...found];
      // The conversation's deepest link already mapped here tells which lineage is its own.
      let anchor: string | null = null;
      let anchorDepth = 0;
      for (let i = n - 1; i >= 0 && anchor === null; i--) {
        const k = rb.linkBlock.get(chain[i]);
        const b = k === undefined ? undefined : rb.blocks.get(k);
        if (k !== undefined && b !== undefined && b.depth > 0 && b.depth <= depth) [anchor, anchorDepth] = [k, b.depth];
      }
      let mine = anchor === null ? candidates : candidates.filter((k) => ancestor(rb, k, anchorDepth) === anchor);
      // Nothing new stored (the whole prompt came from cache): the block at that depth of the
      // conversation's own lineage, whenever it was stored.
      if (mine.length === 0 && anchor !== null) mine = [...(rb.byDepth.get(depth) ?? [])].filter((k) => ancestor(rb, k, anchorDepth) === anchor);
      if (mine.length === 0) return { learned: false, reason: 'none' };
      if (mine.length > 1) return { learned: false, reason: 'ambiguous' };
      // Links spread up the lineage by their share of the prompt (estimated tokens scaled to P).
      const scale = promptTokens / chainTokens[n - 1];
      let key: string | null = mine[0];
      let b = rb.blocks.get(key);
      for (let i = n - 1; i >= 0 && b !== undefined; i--) {
        const d = Math.floor((chainTokens[i] * scale) / bs);
        if (d <= 0) break;
        while (b !== undefined && b.depth > d) {
          key = b.parent;
          b = parentOf(rb, b);
        }
        if (b === undefined || key === null || b.depth !== d) break;
        const was = rb.linkBlock.get(chain[i]);
        if (was === key) continue;
        if (was !== undefined) {
          const wb = rb.blocks.get(was);
          if (wb?.links) wb.links = wb.links.filter((l) => l !== chain[i]);
        }
        rb.linkBlock.set(chain[i], key);
        (b.links ??= []).push(chain[i]);
      }
      return { learned: true, reason: 'learned' };
    },

    stats(replica) {
      const rb = byReplica.get(replica);
      return rb === undefined ? null : { blocks: rb.blocks.size, links: rb.linkBlock.size };
    },

    replicas: () => [...byReplica.keys()],
  };
}
