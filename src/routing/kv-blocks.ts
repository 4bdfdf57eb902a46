/**
 * Engine blocks as slots of flat typed arrays, for kv-residency.ts: the fleet's blocks in one
 * slab with one budget, least recently used out first (touch()), and a block found by (stream, hash)
 * through an open-addressing table (linear probing, backward-shift deletion) of slot numbers.
 *
 * A hash is kept as a 64-bit fingerprint of its decoded key (two independent 32-bit FNV-1a lanes
 * over the key's characters), not as the string: two different blocks of one stream share a
 * fingerprint with odds of about n² / 2⁶⁵ (n = 2M blocks: 1 in 10 million), and then one stands
 * for the other.
 *
 * Bytes per block: 4 × 4 (own and parent fingerprint) + 4 depth + 8 stored-at + 4 stream + 1 flags
 * + 4 × 4 (recency and depth lists) = 49, and 8 more for the table kept at most half full: 57
 * (60 measured with kv-residency.ts's depth heads and rings, `npm run bench:kv-events`).
 * Slabs grow by doubling up to the budget, so a gateway with few replicas pays for few blocks.
 */

export const NIL = -1;
const FIRST = 4096;
const USED = 1;
const HAS_PARENT = 2;

export interface BlockSlab {
  readonly depth: Int32Array;
  readonly storedAt: Float64Array;
  readonly sid: Int32Array;
  /** Same-depth list of a stream (kv-residency.ts keeps the heads). */
  readonly dPrev: Int32Array;
  readonly dNext: Int32Array;
  find(stream: number, key: string): number;
  /** A new block; when the budget is full, the least recently used one is evicted first (onEvict). */
  insert(stream: number, key: string, parent: string | null, depth: number, now: number): number;
  /** The block's parent's slot, if held. */
  parentSlot(s: number): number;
  /** Most recently stored now. */
  touch(s: number): void;
  free(s: number): void;
  used(s: number): boolean;
  size(): number;
  /** Told of a block the budget evicts, before its slot is reused. */
  onEvict: (s: number) => void;
}

// The fingerprint of the last key hashed (two lanes), kept here rather than allocated per call.
let fpHi = 0;
let fpLo = 0;
function fingerprint(key: string): void {
  let a = 0x811c9dc5, b = 0x050c5d1f;
  for (let i = 0; i < key.length; i++) {
    const c = key.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x01000193) ^ (b >>> 15);
  }
  fpHi = a >>> 0;
  fpLo = b >>> 0;
}

const home = (stream: number, hi: number, lo: number, mask: number): number => {
  let h = Math.imul(lo ^ Math.imul(stream + 1, 0x85ebca6b), 0x9e3779b1) ^ hi;
  h ^= h >>> 16;
  return Math.imul(h, 0xc2b2ae35) & mask;
};

export function createBlockSlab(maxBlocks: number): BlockSlab {
  let cap = Math.min(maxBlocks, FIRST);
  let keyHi = new Uint32Array(cap), keyLo = new Uint32Array(cap);
  let parHi = new Uint32Array(cap), parLo = new Uint32Array(cap);
  let flags = new Uint8Array(cap);
  let prev = new Int32Array(cap), next = new Int32Array(cap);
  let table = new Int32Array(0);
  let mask = 0;
  let used = 0;
  let count = 0;
  let freeHead = NIL;
  let head = NIL, tail = NIL;

  const self: BlockSlab = {
    depth: new Int32Array(cap),
    storedAt: new Float64Array(cap),
    sid: new Int32Array(cap),
    dPrev: new Int32Array(cap),
    dNext: new Int32Array(cap),
    find,
    insert,
    parentSlot(s) {
      if ((flags[s] & HAS_PARENT) === 0) return NIL;
      return lookup(self.sid[s], parHi[s], parLo[s]);
    },
    touch(s) {
      unlink(s);
      pushHead(s);
    },
    free(s) {
      remove(s);
      next[s] = freeHead;
      freeHead = s;
    },
    used: (s) => s >= 0 && s < used && (flags[s] & USED) !== 0,
    size: () => count,
    onEvict: () => undefined,
  };

  function rebuildTable(): void {
    let size = 16;
    while (size < cap * 2) size *= 2;
    table = new Int32Array(size).fill(NIL);
    mask = size - 1;
    for (let s = 0; s < used; s++) if ((flags[s] & USED) !== 0) place(s);
  }

  function place(s: number): void {
    let i = home(self.sid[s], keyHi[s], keyLo[s], mask);
    while (table[i] !== NIL) i = (i + 1) & mask;
    table[i] = s;
  }

  function lookup(stream: number, hi: number, lo: number): number {
    if (count === 0) return NIL;
    for (let i = home(stream, hi, lo, mask); ; i = (i + 1) & mask) {
      const s = table[i];
      if (s === NIL) return NIL;
      if (keyLo[s] === lo && keyHi[s] === hi && self.sid[s] === stream) return s;
    }
  }

  function find(stream: number, key: string): number {
    fingerprint(key);
    return lookup(stream, fpHi, fpLo);
  }

  function unplace(s: number): void {
    let i = home(self.sid[s], keyHi[s], keyLo[s], mask);
    while (table[i] !== s) i = (i + 1) & mask;
    table[i] = NIL;
    // Backward shift: every later entry of the run that may live at i moves there.
    for (let j = (i + 1) & mask; table[j] !== NIL; j = (j + 1) & mask) {
      const t = table[j];
      const k = home(self.sid[t], keyHi[t], keyLo[t], mask);
      const between = i <= j ? k > i && k <= j : k > i || k <= j;
      if (!between) {
        table[i] = t;
        table[j] = NIL;
        i = j;
      }
    }
  }

  function unlink(s: number): void {
    const p = prev[s], n = next[s];
    if (p !== NIL) next[p] = n; else head = n;
    if (n !== NIL) prev[n] = p; else tail = p;
  }
  function pushHead(s: number): void {
    prev[s] = NIL;
    next[s] = head;
    if (head !== NIL) prev[head] = s; else tail = s;
    head = s;
  }

  function remove(s: number): void {
    unplace(s);
    unlink(s);
    flags[s] = 0;
    count--;
  }

  function grow(): void {
    const n = Math.min(maxBlocks, cap * 2);
    const u32 = (a: Uint32Array) => { const b = new Uint32Array(n); b.set(a); return b; };
    const i32 = (a: Int32Array) => { const b = new Int32Array(n); b.set(a); return b; };
    keyHi = u32(keyHi); keyLo = u32(keyLo); parHi = u32(parHi); parLo = u32(parLo);
    const f = new Uint8Array(n); f.set(flags); flags = f;
    prev = i32(prev); next = i32(next);
    const mut = self as { -readonly [K in keyof BlockSlab]: BlockSlab[K] };
    mut.depth = i32(self.depth);
    mut.sid = i32(self.sid);
    mut.dPrev = i32(self.dPrev);
    mut.dNext = i32(self.dNext);
    const at = new Float64Array(n); at.set(self.storedAt); mut.storedAt = at;
    cap = n;
    rebuildTable();
  }

  function alloc(): number {
    if (freeHead !== NIL) {
      const s = freeHead;
      freeHead = next[s];
      return s;
    }
    if (used === cap && cap < maxBlocks) grow();
    if (used < cap) return used++;
    const victim = tail;
    self.onEvict(victim);
    remove(victim);
    return victim;
  }

  function insert(stream: number, key: string, parent: string | null, depth: number, now: number): number {
    const s = alloc();
    fingerprint(key);
    keyHi[s] = fpHi;
    keyLo[s] = fpLo;
    if (parent === null) flags[s] = USED;
    else {
      fingerprint(parent);
      parHi[s] = fpHi;
      parLo[s] = fpLo;
      flags[s] = USED | HAS_PARENT;
    }
    self.sid[s] = stream;
    self.depth[s] = depth;
    self.storedAt[s] = now;
    place(s);
    pushHead(s);
    count++;
    return s;
  }

  rebuildTable();
  return self;
}

/**
 * The block's parent, only while the lineage is consistent (one level up). A parent removed and
 * stored again under another parent has another depth; following it could loop for ever (A's
 * parent B, B's parent A), and these walks run on the event loop.
 */
export function parentOf(slab: BlockSlab, s: number): number {
  const p = slab.parentSlot(s);
  return p !== NIL && slab.depth[p] === slab.depth[s] - 1 ? p : NIL;
}

/** The ancestor of slot `s` at `depth` (the block itself at its own depth). */
export function ancestor(slab: BlockSlab, s: number, depth: number): number {
  let b = s;
  while (b !== NIL && slab.depth[b] > depth) b = parentOf(slab, b);
  return b !== NIL && slab.depth[b] === depth ? b : NIL;
}
