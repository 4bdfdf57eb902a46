/**
 * Fixed-size block chains (completion prompts) in one WebAssembly call.
 *
 * Why not xxhash-wasm per block: a 9K-token prompt is ~570 blocks of 64 bytes, and each library
 * call costs ~0.2 µs of boundary crossing, BigInt conversion and a view allocation — 130 µs in all,
 * for 3 µs of hashing. This module runs the whole chain inside wasm: link i = xxh64(block i,
 * seed = link i−1), each written as 16 lowercase hex digits that JS reads into one flat string
 * per link. The hash is standard XXH64 (checked against xxhash-wasm in
 * test/identify/block-hash.test.ts); the module is assembled here from its opcodes, ~500 bytes.
 */

const P1 = 0x9e3779b185ebca87n;
const P2 = 0xc2b2ae3d27d4eb4fn;
const P3 = 0x165667b19e3779f9n;
const P4 = 0x85ebca77c2b2ae63n;
const P5 = 0x27d4eb2f165667c5n;

function uleb(n: number): number[] {
  const out: number[] = [];
  do {
    let b = n & 0x7f;
    n >>>= 7;
    if (n !== 0) b |= 0x80;
    out.push(b);
  } while (n !== 0);
  return out;
}

function sleb(v: bigint): number[] {
  const out: number[] = [];
  for (;;) {
    const b = Number(v & 0x7fn);
    v >>= 7n;
    if ((v === 0n && (b & 0x40) === 0) || (v === -1n && (b & 0x40) !== 0)) return [...out, b];
    out.push(b | 0x80);
  }
}

const vec = (items: number[][]): number[] => [...uleb(items.length), ...items.flat()];
const section = (id: number, body: number[]): number[] => [id, ...uleb(body.length), ...body];
const name = (s: string): number[] => [...uleb(s.length), ...Buffer.from(s, 'utf8')];

// Opcodes (https://webassembly.github.io/spec/core/binary/instructions.html).
const I32 = 0x7f, I64 = 0x7e, VOID = 0x40;
const get = (i: number) => [0x20, ...uleb(i)];
const set = (i: number) => [0x21, ...uleb(i)];
const tee = (i: number) => [0x22, ...uleb(i)];
const i32c = (v: number) => [0x41, ...sleb(BigInt(v))];
const i64c = (v: bigint) => [0x42, ...sleb(BigInt.asIntN(64, v))];
const op = {
  block: [0x02, VOID], loop: [0x03, VOID], if: [0x04, VOID], else: [0x05], end: [0x0b],
  br: (d: number) => [0x0c, d], brIf: (d: number) => [0x0d, d], call: (f: number) => [0x10, f], select: [0x1b],
  i64load: (off: number) => [0x29, 0, ...uleb(off)], i64load32u: [0x35, 0, 0], i64load8u: [0x31, 0, 0], i32store8: [0x3a, 0, 0],
  i32add: [0x6a], i32sub: [0x6b], i32shl: [0x74], i32ltu: [0x49], i32gtu: [0x4b], i32leu: [0x4d], i32geu: [0x4f],
  i64add: [0x7c], i64sub: [0x7d], i64mul: [0x7e], i64and: [0x83], i64xor: [0x85], i64shru: [0x88], i64rotl: [0x89],
  wrap: [0xa7], extendU: [0xad],
};

/** round(0, value on the stack): × P2, rotl 31, × P1. */
const round0 = [...i64c(P2), ...op.i64mul, ...i64c(31n), ...op.i64rotl, ...i64c(P1), ...op.i64mul];
/** acc = round(acc, load64(p + off)). */
const roundInto = (acc: number, p: number, off: number) => [
  ...get(acc), ...get(p), ...op.i64load(off), ...i64c(P2), ...op.i64mul, ...op.i64add,
  ...i64c(31n), ...op.i64rotl, ...i64c(P1), ...op.i64mul, ...set(acc),
];
/** h = (h ^ round0(v)) × P1 + P4. */
const merge = (h: number, v: number) => [...get(h), ...get(v), ...round0, ...op.i64xor, ...i64c(P1), ...op.i64mul, ...i64c(P4), ...op.i64add, ...set(h)];

// xxh64(ptr i32, len i32, seed i64) → i64. Locals: end 3, limit 4, p 5 (i32); v1..v4 6–9, h 10 (i64).
const xxh64Body = [
  ...get(0), ...get(1), ...op.i32add, ...set(3), ...get(0), ...set(5),
  ...get(1), ...i32c(32), ...op.i32geu, ...op.if,
  ...get(2), ...i64c(P1), ...op.i64add, ...i64c(P2), ...op.i64add, ...set(6),
  ...get(2), ...i64c(P2), ...op.i64add, ...set(7),
  ...get(2), ...set(8),
  ...get(2), ...i64c(P1), ...op.i64sub, ...set(9),
  ...get(3), ...i32c(32), ...op.i32sub, ...set(4),
  ...op.loop,
  ...roundInto(6, 5, 0), ...roundInto(7, 5, 8), ...roundInto(8, 5, 16), ...roundInto(9, 5, 24),
  ...get(5), ...i32c(32), ...op.i32add, ...tee(5), ...get(4), ...op.i32leu, ...op.brIf(0),
  ...op.end,
  ...get(6), ...i64c(1n), ...op.i64rotl, ...get(7), ...i64c(7n), ...op.i64rotl, ...op.i64add,
  ...get(8), ...i64c(12n), ...op.i64rotl, ...op.i64add, ...get(9), ...i64c(18n), ...op.i64rotl, ...op.i64add, ...set(10),
  ...merge(10, 6), ...merge(10, 7), ...merge(10, 8), ...merge(10, 9),
  ...op.else,
  ...get(2), ...i64c(P5), ...op.i64add, ...set(10),
  ...op.end,
  ...get(10), ...get(1), ...op.extendU, ...op.i64add, ...set(10),
  // 8-byte lanes
  ...op.block, ...op.loop,
  ...get(5), ...i32c(8), ...op.i32add, ...get(3), ...op.i32gtu, ...op.brIf(1),
  ...get(10), ...get(5), ...op.i64load(0), ...round0, ...op.i64xor, ...i64c(27n), ...op.i64rotl, ...i64c(P1), ...op.i64mul, ...i64c(P4), ...op.i64add, ...set(10),
  ...get(5), ...i32c(8), ...op.i32add, ...set(5), ...op.br(0),
  ...op.end, ...op.end,
  // one 4-byte lane
  ...get(5), ...i32c(4), ...op.i32add, ...get(3), ...op.i32leu, ...op.if,
  ...get(10), ...get(5), ...op.i64load32u, ...i64c(P1), ...op.i64mul, ...op.i64xor, ...i64c(23n), ...op.i64rotl, ...i64c(P2), ...op.i64mul, ...i64c(P3), ...op.i64add, ...set(10),
  ...get(5), ...i32c(4), ...op.i32add, ...set(5),
  ...op.end,
  // bytes
  ...op.block, ...op.loop,
  ...get(5), ...get(3), ...op.i32geu, ...op.brIf(1),
  ...get(10), ...get(5), ...op.i64load8u, ...i64c(P5), ...op.i64mul, ...op.i64xor, ...i64c(11n), ...op.i64rotl, ...i64c(P1), ...op.i64mul, ...set(10),
  ...get(5), ...i32c(1), ...op.i32add, ...set(5), ...op.br(0),
  ...op.end, ...op.end,
  // avalanche
  ...get(10), ...get(10), ...i64c(33n), ...op.i64shru, ...op.i64xor, ...i64c(P2), ...op.i64mul, ...set(10),
  ...get(10), ...get(10), ...i64c(29n), ...op.i64shru, ...op.i64xor, ...i64c(P3), ...op.i64mul, ...set(10),
  ...get(10), ...get(10), ...i64c(32n), ...op.i64shru, ...op.i64xor,
  ...op.end,
];

// chain(in i32, len i32, block i32, seed i64, out i32) → links. Locals: off 5, n 6, size 7 (i32);
// h 8 (i64); k 9, at 10, nib 11 (i32).
const chainBody = [
  ...op.block, ...op.loop,
  ...get(5), ...get(1), ...op.i32geu, ...op.brIf(1),
  ...get(1), ...get(5), ...op.i32sub, ...set(7),
  ...get(7), ...get(2), ...get(7), ...get(2), ...op.i32ltu, ...op.select, ...set(7),
  ...get(0), ...get(5), ...op.i32add, ...get(7), ...get(3), ...op.call(0), ...tee(8), ...set(3),
  ...get(4), ...get(6), ...i32c(4), ...op.i32shl, ...op.i32add, ...set(10),
  ...i32c(0), ...set(9),
  ...op.loop,
  ...get(10), ...get(9), ...op.i32add,
  ...get(8), ...i64c(60n), ...get(9), ...i32c(2), ...op.i32shl, ...op.extendU, ...op.i64sub, ...op.i64shru, ...i64c(15n), ...op.i64and, ...op.wrap, ...set(11),
  ...get(11), ...i32c(48), ...op.i32add, ...get(11), ...i32c(87), ...op.i32add, ...get(11), ...i32c(10), ...op.i32ltu, ...op.select,
  ...op.i32store8,
  ...get(9), ...i32c(1), ...op.i32add, ...tee(9), ...i32c(16), ...op.i32ltu, ...op.brIf(0),
  ...op.end,
  ...get(6), ...i32c(1), ...op.i32add, ...set(6),
  ...get(5), ...get(2), ...op.i32add, ...set(5), ...op.br(0),
  ...op.end, ...op.end,
  ...get(6),
  ...op.end,
];

const fn = (locals: number[][], body: number[]) => {
  const code = [...vec(locals), ...body];
  return [...uleb(code.length), ...code];
};

const wasm = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
  ...section(1, vec([[0x60, ...vec([[I32], [I32], [I64]]), ...vec([[I64]])], [0x60, ...vec([[I32], [I32], [I32], [I64], [I32]]), ...vec([[I32]])]])),
  ...section(3, vec([[0], [1]])),
  ...section(5, vec([[0x00, 1]])),
  ...section(7, vec([[...name('mem'), 0x02, 0], [...name('xxh64'), 0x00, 0], [...name('chain'), 0x00, 1]])),
  ...section(10, vec([fn([[3, I32], [5, I64]], xxh64Body), fn([[3, I32], [1, I64], [3, I32]], chainBody)])),
]);

const exports = new WebAssembly.Instance(new WebAssembly.Module(wasm)).exports as {
  mem: WebAssembly.Memory;
  xxh64(ptr: number, len: number, seed: bigint): bigint;
  chain(ptr: number, len: number, block: number, seed: bigint, out: number): number;
};

const PAGE = 65536;

/** The kernel's memory with room for `bytes`, as a fresh view (growing detaches old views). */
export function kernelMemory(bytes: number): Uint8Array {
  const { mem } = exports;
  if (mem.buffer.byteLength < bytes) mem.grow(Math.ceil((bytes - mem.buffer.byteLength) / PAGE));
  return new Uint8Array(mem.buffer);
}

/** XXH64 of kernel memory [ptr, ptr + len). */
export function kernelXxh64(ptr: number, len: number, seed: bigint): bigint {
  return BigInt.asUintN(64, exports.xxh64(ptr, len, seed));
}

/**
 * Chains `len` bytes at kernel offset 0 in blocks of `block`, starting from `seed`. Returns one
 * 16-hex-digit link per block, each a flat string of its own. Not slices of one hex string: V8
 * keeps a slice of 13 characters or more as a view of its parent, so one link kept in the prefix
 * index or a pin would hold the whole prompt's hex (9 KB for a 9K-token prompt).
 * `String.fromCharCode` with 16 codes allocates exactly the 16 bytes; measured in
 * test/identify/link-memory.test.ts.
 */
export function kernelChain(len: number, block: number, seed: bigint): string[] {
  const n = Math.ceil(len / block);
  const out = (len + 7) & ~7;
  kernelMemory(out + n * 16);
  const count = exports.chain(0, len, block, BigInt.asIntN(64, seed), out);
  const b = new Uint8Array(exports.mem.buffer, out, count * 16);
  const links = new Array<string>(count);
  for (let i = 0, p = 0; i < count; i++, p += 16) {
    links[i] = String.fromCharCode(
      b[p], b[p + 1], b[p + 2], b[p + 3], b[p + 4], b[p + 5], b[p + 6], b[p + 7],
      b[p + 8], b[p + 9], b[p + 10], b[p + 11], b[p + 12], b[p + 13], b[p + 14], b[p + 15],
    );
  }
  return links;
}
