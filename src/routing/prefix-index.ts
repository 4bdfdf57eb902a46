/**
 * Which replica recently served which chain link: the gateway's model of every replica's prefix
 * cache, bounded three ways — a global LRU by entries, an age past which an entry is believed
 * evicted, and a per-replica token budget (its KV capacity) that forgets the replica's least
 * recently used links first. The age starts at the TTL and is each replica's own: the cached-token
 * feedback lowers it when the replica served less than predicted (evicted()) and raises it back
 * when an old prefix was still served (kept()). An entry matched to an engine block of a live KV
 * event stream is exact (markExact()): it does not expire by age and the feedback leaves it alone,
 * since the events say when it goes (forgetLinks()); every other entry of that replica, never
 * matched (learnt before the stream was live, or on a gateway started against a running fleet),
 * keeps its replica's age and feedback.
 *
 * An entry is one (link, replica) pair. Entries live in a slab of typed arrays indexed by slot, so
 * 600K of them are a few flat arrays rather than 600K heap objects for the GC to trace:
 *   - `heads`: Map link → first slot holding that link; further replicas chain through `sib`.
 *   - a global doubly linked list (gPrev/gNext) in recency order, for the LRU bound and the TTL
 *     sweep (the tail is always the oldest);
 *   - one doubly linked list per replica (rPrev/rNext), for its token budget.
 *
 * Memory per entry, measured in test/routing/prefix-index.test.ts (≈ 120 B): the Map entry and its
 * key string (the 16-hex-digit link, shared with nothing else once the request is gone) ≈ 70 B,
 * plus 44 B of typed arrays and an 8 B pointer in `links`. The default 640K entries — 10,000 live
 * sessions × 30 turns × ~2 new links per turn (the user message and the reply before it) — stay
 * under 100 MB. Slabs grow by doubling up to `maxEntries`, so an idle gateway pays little.
 */

export interface PrefixIndexOptions {
  /** Most (link, replica) entries kept; 0 disables the index. */
  readonly maxEntries: number;
  /** An entry not refreshed for this long is treated as evicted by the replica. */
  readonly ttlMs: number;
}

export interface PrefixIndex {
  /**
   * Longest match per replica, scanning from the chain's end backwards: replica → tokens of the
   * longest chain prefix it holds. Stops once `want` replicas have matched.
   */
  match(chain: readonly string[], chainTokens: readonly number[], now: number, want?: number): Map<string, number>;
  /** The replica now holds every link of the chain (it just served the request). */
  /** `added`: receives the links the replica did not hold before (its caller may take them back). */
  record(chain: readonly string[], chainTokens: readonly number[], replica: string, now: number, added?: string[]): void;
  /** The replica's KV capacity in tokens (null or ≤ 0: unknown, no per-replica bound). */
  setCapacity(replica: string, tokens: number | null): void;
  forgetReplica(replica: string): void;
  /** The replica no longer holds these links (its KV events said so). */
  forgetLinks(replica: string, links: readonly string[]): void;
  /**
   * Exact residency per link: these links are matched to engine blocks whose removal the
   * replica's KV events will name, so they no longer expire by age and the feedback leaves them
   * alone (the bounds by entries and capacity still hold). Off: the replica's estimate again.
   */
  markExact(replica: string, links: readonly string[], exact: boolean): void;
  /** The replica left the fleet: its entries go and its id is free for another. */
  removeReplica(replica: string): void;
  /**
   * The replica served only `keptTokens` of a chain the index believed warm beyond that: it has
   * evicted. The chain's links past `keptTokens` go, and so does everything the replica last used
   * no later than the lost link (it frees least recently used first). Its retention estimate
   * drops to the lost link's age. Returns that age, or null when the index held nothing beyond.
   */
  evicted(replica: string, chain: readonly string[], chainTokens: readonly number[], keptTokens: number, now: number): number | null;
  /** The replica served the chain's first `tokens` from cache: it keeps things at least that long. */
  kept(replica: string, chain: readonly string[], chainTokens: readonly number[], tokens: number, now: number): void;
  /** How long the index believes the replica keeps an unused prefix it has not matched to an engine block. */
  retentionMs(replica: string): number;
  size(): number;
  tokensByReplica(): Map<string, number>;
  /** Entries exact by KV events, per replica. */
  exactByReplica(): Map<string, number>;
}

const NIL = -1;
// A miss found right after a turn would drive the estimate to 0 and blind routing to that replica
// until a hit; a second is below any useful retention and keeps the replica's latest turns.
const MIN_RETENTION_MS = 1000;
const FIRST_SLAB = 4096;
// Expired entries are reclaimed at most this often (match() checks each entry's age anyway).
const SWEEP_MS = 1000;

export function createPrefixIndex(opts: PrefixIndexOptions): PrefixIndex {
  const max = Math.max(0, Math.floor(opts.maxEntries));
  const ttl = opts.ttlMs;
  let cap = Math.min(max, FIRST_SLAB);
  let links: (string | undefined)[] = new Array(cap);
  let rep = new Int32Array(cap);
  let incr = new Int32Array(cap);
  let seen = new Float64Array(cap);
  let gPrev = new Int32Array(cap);
  let gNext = new Int32Array(cap);
  let rPrev = new Int32Array(cap);
  let rNext = new Int32Array(cap);
  let sib = new Int32Array(cap);
  let exactF = new Uint8Array(cap);
  let sweptAt = -Infinity;
  let used = 0;
  let free = NIL;
  let count = 0;
  let gHead = NIL;
  let gTail = NIL;
  const heads = new Map<string, number>();

  const ids = new Map<string, number>();
  /** By id; undefined once the replica left (its id is reused, so the sweep walks present ones only). */
  const names: (string | undefined)[] = [];
  const freeIds: number[] = [];
  const rHead: number[] = [];
  const rTail: number[] = [];
  const rTokens: number[] = [];
  const rCap: number[] = [];
  /** Per replica: the feedback's retention estimate (≤ ttl); entries exact by KV events. */
  const rRetention: number[] = [];
  const rExact: number[] = [];
  const ttlOf = (s: number) => (exactF[s] === 1 ? Infinity : rRetention[rep[s]]);

  function idOf(name: string): number {
    let r = ids.get(name);
    if (r === undefined) {
      r = freeIds.pop() ?? names.length;
      ids.set(name, r);
      names[r] = name;
      rHead[r] = NIL;
      rTail[r] = NIL;
      rTokens[r] = 0;
      rCap[r] = Infinity;
      rRetention[r] = ttl;
      rExact[r] = 0;
    }
    return r;
  }

  function grow(): void {
    const next = Math.min(max, cap * 2);
    const widen = <T extends Int32Array | Float64Array>(a: T, make: (n: number) => T): T => {
      const b = make(next);
      b.set(a);
      return b;
    };
    const i32 = (n: number) => new Int32Array(n);
    rep = widen(rep, i32);
    incr = widen(incr, i32);
    seen = widen(seen, (n) => new Float64Array(n));
    gPrev = widen(gPrev, i32);
    gNext = widen(gNext, i32);
    rPrev = widen(rPrev, i32);
    rNext = widen(rNext, i32);
    sib = widen(sib, i32);
    const e = new Uint8Array(next);
    e.set(exactF);
    exactF = e;
    links.length = next;
    cap = next;
  }

  function unlinkGlobal(s: number): void {
    const p = gPrev[s], n = gNext[s];
    if (p !== NIL) gNext[p] = n; else gHead = n;
    if (n !== NIL) gPrev[n] = p; else gTail = p;
  }
  function pushGlobal(s: number): void {
    gPrev[s] = NIL;
    gNext[s] = gHead;
    if (gHead !== NIL) gPrev[gHead] = s; else gTail = s;
    gHead = s;
  }
  function unlinkReplica(s: number): void {
    const r = rep[s], p = rPrev[s], n = rNext[s];
    if (p !== NIL) rNext[p] = n; else rHead[r] = n;
    if (n !== NIL) rPrev[n] = p; else rTail[r] = p;
  }
  function pushReplica(s: number): void {
    const r = rep[s];
    rPrev[s] = NIL;
    rNext[s] = rHead[r];
    if (rHead[r] !== NIL) rPrev[rHead[r]] = s; else rTail[r] = s;
    rHead[r] = s;
  }

  function remove(s: number): void {
    unlinkGlobal(s);
    unlinkReplica(s);
    rTokens[rep[s]] -= incr[s];
    if (exactF[s] === 1) {
      rExact[rep[s]]--;
      exactF[s] = 0;
    }
    const link = links[s] as string;
    const head = heads.get(link) as number;
    if (head === s) {
      if (sib[s] === NIL) heads.delete(link); else heads.set(link, sib[s]);
    } else {
      let p = head;
      while (sib[p] !== s) p = sib[p];
      sib[p] = sib[s];
    }
    links[s] = undefined;
    count--;
    gNext[s] = free;
    free = s;
  }

  function alloc(): number {
    if (free === NIL) {
      if (used === cap && cap < max) grow();
      if (used < cap) return used++;
      remove(gTail); // full: the least recently used entry makes room
    }
    const s = free;
    free = gNext[s];
    return s;
  }

  function find(link: string, r: number): number {
    let s = heads.get(link) ?? NIL;
    while (s !== NIL && rep[s] !== r) s = sib[s];
    return s;
  }

  function fitCapacity(r: number): void {
    while (rTokens[r] > rCap[r] && rTail[r] !== NIL) remove(rTail[r]);
  }

  // Per replica, oldest first: each has its own retention; exact entries are stepped over.
  function sweepExpired(now: number): void {
    if (now - sweptAt < SWEEP_MS) return;
    sweptAt = now;
    for (let r = 0; r < names.length; r++) {
      if (names[r] === undefined) continue;
      const t = rRetention[r];
      for (let s = rTail[r]; s !== NIL && now - seen[s] > t;) {
        const up = rPrev[s];
        if (exactF[s] === 0) remove(s);
        s = up;
      }
    }
  }

  /** Slot of the chain's deepest link on replica r holding more than `tokens`, scanning back. */
  function deepestBeyond(chain: readonly string[], chainTokens: readonly number[], r: number, tokens: number): number {
    for (let i = chain.length - 1; i >= 0 && chainTokens[i] > tokens; i--) {
      const s = find(chain[i], r);
      if (s !== NIL && exactF[s] === 0) return s;
    }
    return NIL;
  }

  return {
    match(chain, chainTokens, now, want = Infinity) {
      const out = new Map<string, number>();
      if (count === 0) return out;
      for (let i = chain.length - 1; i >= 0; i--) {
        let s = heads.get(chain[i]) ?? NIL;
        for (; s !== NIL; s = sib[s]) {
          if (now - seen[s] > ttlOf(s)) continue;
          const name = names[rep[s]] as string;
          if (!out.has(name)) out.set(name, chainTokens[i]);
        }
        if (out.size >= want) break;
      }
      return out;
    },

    record(chain, chainTokens, replica, now, added) {
      if (max === 0 || chain.length === 0) return;
      sweepExpired(now);
      const r = idOf(replica);
      // Last link first, so the chain's first links end up most recent: when the replica runs out
      // of room the tail of a prefix goes before its head, as vLLM frees a request's blocks.
      for (let i = chain.length - 1; i >= 0; i--) {
        const link = chain[i];
        let s = find(link, r);
        if (s !== NIL) {
          unlinkGlobal(s);
          unlinkReplica(s);
        } else {
          s = alloc();
          links[s] = link;
          rep[s] = r;
          incr[s] = chainTokens[i] - (i > 0 ? chainTokens[i - 1] : 0);
          sib[s] = heads.get(link) ?? NIL;
          heads.set(link, s);
          rTokens[r] += incr[s];
          count++;
          added?.push(link);
        }
        seen[s] = now;
        pushGlobal(s);
        pushReplica(s);
      }
      fitCapacity(r);
    },

    setCapacity(replica, tokens) {
      const c = tokens === null || !(tokens > 0) ? Infinity : tokens;
      const r = idOf(replica);
      if (rCap[r] === c) return;
      rCap[r] = c;
      fitCapacity(r);
    },

    forgetReplica(replica) {
      const r = ids.get(replica);
      if (r === undefined) return;
      while (rHead[r] !== NIL) remove(rHead[r]);
    },

    forgetLinks(replica, lost) {
      const r = ids.get(replica);
      if (r === undefined) return;
      for (const link of lost) {
        const s = find(link, r);
        if (s !== NIL) remove(s);
      }
    },

    markExact(replica, marked, exact) {
      const r = ids.get(replica);
      if (r === undefined) return;
      const want = exact ? 1 : 0;
      for (const link of marked) {
        const s = find(link, r);
        if (s === NIL || exactF[s] === want) continue;
        exactF[s] = want;
        rExact[r] += exact ? 1 : -1;
      }
    },

    removeReplica(replica) {
      const r = ids.get(replica);
      if (r === undefined) return;
      while (rHead[r] !== NIL) remove(rHead[r]);
      ids.delete(replica);
      names[r] = undefined;
      freeIds.push(r);
    },

    evicted(replica, chain, chainTokens, keptTokens, now) {
      const r = ids.get(replica);
      if (r === undefined) return null;
      const lost = deepestBeyond(chain, chainTokens, r, keptTokens);
      if (lost === NIL) return null;
      const lostAt = seen[lost];
      // Exact entries stay: the events, not this guess, say when they go.
      for (let i = chain.length - 1; i >= 0 && chainTokens[i] > keptTokens; i--) {
        const s = find(chain[i], r);
        if (s !== NIL && exactF[s] === 0) remove(s);
      }
      for (let s = rTail[r]; s !== NIL && seen[s] <= lostAt;) {
        const up = rPrev[s];
        if (exactF[s] === 0) remove(s);
        s = up;
      }
      const age = Math.max(0, now - lostAt);
      rRetention[r] = Math.min(rRetention[r], Math.max(age, MIN_RETENTION_MS));
      return age;
    },

    kept(replica, chain, chainTokens, tokens, now) {
      const r = ids.get(replica);
      if (r === undefined || tokens <= 0) return;
      // The deepest link within what was served from cache: it had been kept since it was last seen.
      for (let i = chain.length - 1; i >= 0; i--) {
        if (chainTokens[i] > tokens) continue;
        const s = find(chain[i], r);
        if (s === NIL || exactF[s] === 1) continue;
        rRetention[r] = Math.min(ttl, Math.max(rRetention[r], now - seen[s]));
        return;
      }
    },

    retentionMs(replica) {
      const r = ids.get(replica);
      return r === undefined ? ttl : rRetention[r];
    },

    size: () => count,

    tokensByReplica() {
      const out = new Map<string, number>();
      for (let r = 0; r < names.length; r++) if (names[r] !== undefined && rTokens[r] > 0) out.set(names[r] as string, rTokens[r]);
      return out;
    },

    exactByReplica() {
      const out = new Map<string, number>();
      for (let r = 0; r < names.length; r++) if (names[r] !== undefined && rExact[r] > 0) out.set(names[r] as string, rExact[r]);
      return out;
    },
  };
}
