// The KV block pool with vLLM V1 prefix-caching semantics:
// - a block is cacheable once full; its key is the chained hash of its tokens and its parent;
// - blocks referenced by a running request are pinned (ref > 0);
// - unreferenced blocks sit in a free queue and keep their hash until the queue hands them out
//   again, which is the eviction (least recently freed first);
// - a finished request frees its blocks tail-first, so a prefix's last blocks go before its first;
// - as vLLM 0.32's block pool (`v1/core/block_pool.py`), checked against recorded vLLM runs
//   (bench/calibrate): one block of `num_gpu_blocks` is the null block and never holds KV, and a
//   freed block with no hash (a partial tail block) goes to the front of the free queue, reused
//   before any cached block is evicted. `model: 'naive'` keeps the model as it was before that
//   check (every block usable, every freed block at the back), for comparisons.

export interface BlockPool {
  /** Blocks that can hold KV (vLLM's num_gpu_blocks less its null block). */
  readonly total: number;
  freeCount(): number;
  /** vLLM's kv_cache_usage: 1 - free/total, where cached-but-unreferenced blocks count as free. */
  usage(): number;
  cachedCount(): number;
  /** Block ids of the longest run of cached blocks from the start, at most maxBlocks. */
  lookup(hashAt: (i: number) => number, maxBlocks: number): number[];
  /** Whether n fresh blocks can be had once `hits` are pinned. */
  canAllocate(hits: readonly number[], n: number): boolean;
  touch(ids: readonly number[]): void;
  allocate(n: number): number[];
  /**
   * Register a full block under its hash (a no-op when that hash is already cached elsewhere).
   * `parent` and `tokens` are only read when KV events are published.
   */
  cache(id: number, hash: number, parent?: number | null, tokens?: () => readonly number[]): void;
  isCached(id: number): boolean;
  release(ids: readonly number[]): void;
  reset(): void;
}

/** Where the pool reports what it caches and evicts (vLLM's KV events; bench/sim/kv-events.ts). */
export interface PoolEvents {
  stored(hash: number, parent: number | null, tokenIds: readonly number[], blockSize: number): void;
  removed(hash: number): void;
  cleared(): void;
}

/** How faithfully the pool follows vLLM's: `vllm` (0.32's block pool) or `naive` (before it was checked). */
export type KvModel = 'vllm' | 'naive';

/** `numGpuBlocks`: vLLM's num_gpu_blocks; under the vllm model one of them is the null block. */
export function createBlockPool(numGpuBlocks: number, events: PoolEvents | null = null, blockSize = 16, model: KvModel = 'vllm'): BlockPool {
  const total = model === 'vllm' ? Math.max(0, numGpuBlocks - 1) : numGpuBlocks;
  const head = total; // sentinel
  const prev = new Int32Array(total + 1);
  const next = new Int32Array(total + 1);
  const inFree = new Uint8Array(total);
  const ref = new Int32Array(total);
  const hashOf = new Float64Array(total);
  const byHash = new Map<number, number>();
  let free = 0;

  function unlink(id: number): void {
    next[prev[id]] = next[id];
    prev[next[id]] = prev[id];
    inFree[id] = 0;
    free--;
  }
  function insertAfter(at: number, id: number): void {
    const after = next[at];
    prev[after] = id;
    next[id] = after;
    prev[id] = at;
    next[at] = id;
    inFree[id] = 1;
    free++;
  }
  const prepend = (id: number): void => insertAfter(head, id);
  const append = (id: number): void => insertAfter(prev[head], id);
  function reset(): void {
    if (events !== null && byHash.size > 0) events.cleared();
    prev[head] = head;
    next[head] = head;
    free = 0;
    byHash.clear();
    ref.fill(0);
    hashOf.fill(-1);
    for (let i = 0; i < total; i++) append(i);
  }
  reset();

  return {
    total,
    freeCount: () => free,
    usage: () => (total === 0 ? 0 : 1 - free / total),
    cachedCount: () => byHash.size,
    lookup(hashAt, maxBlocks) {
      const ids: number[] = [];
      for (let i = 0; i < maxBlocks; i++) {
        const id = byHash.get(hashAt(i));
        if (id === undefined) break;
        ids.push(id);
      }
      return ids;
    },
    canAllocate(hits, n) {
      let pinnedFromFree = 0;
      for (const id of hits) if (ref[id] === 0) pinnedFromFree++;
      return free - pinnedFromFree >= n;
    },
    touch(ids) {
      for (const id of ids) {
        if (ref[id] === 0 && inFree[id]) unlink(id);
        ref[id]++;
      }
    },
    allocate(n) {
      if (n > free) throw new Error(`KV pool exhausted: want ${n}, free ${free}`);
      const ids: number[] = [];
      for (let k = 0; k < n; k++) {
        const id = next[head];
        unlink(id);
        const h = hashOf[id];
        if (h >= 0 && byHash.get(h) === id) {
          byHash.delete(h); // eviction
          events?.removed(h);
        }
        hashOf[id] = -1;
        ref[id] = 1;
        ids.push(id);
      }
      return ids;
    },
    cache(id, hash, parent = null, tokens) {
      if (hashOf[id] >= 0 || byHash.has(hash)) return;
      hashOf[id] = hash;
      byHash.set(hash, id);
      if (events !== null) events.stored(hash, parent, tokens ? tokens() : [], blockSize);
    },
    isCached: (id) => hashOf[id] >= 0,
    release(ids) {
      // vLLM prepends the uncached ones as one run in freeing order (prepend_n); the tail-first
      // order among them decides nothing, they hold no prefix.
      const uncached: number[] = [];
      for (let k = ids.length - 1; k >= 0; k--) {
        const id = ids[k];
        if (--ref[id] !== 0) continue;
        if (model === 'vllm' && hashOf[id] < 0) uncached.push(id);
        else append(id);
      }
      for (let k = uncached.length - 1; k >= 0; k--) prepend(uncached[k]);
    },
    reset,
  };
}
