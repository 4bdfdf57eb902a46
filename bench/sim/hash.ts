// Cheap deterministic hashing and a seeded PRNG. Token ids and block hashes only need to be
// stable and collision-poor, not cryptographic; 53-bit block keys keep Map lookups on numbers.

import { mulberry32 } from '../../src/prng.js';

export function fnv1a(str: string, seed = 0x811c9dc5): number {
  let h = seed >>> 0;
  for (let i = 0; i < str.length; i++) {
    h ^= str.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

function fmix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** Chained hash of one block: (parent, token ids) → 53-bit integer. Two independent 32-bit lanes. */
export function blockHash(parent: number, tokens: ArrayLike<number>, start: number, end: number): number {
  let a = (parent % 0x100000000) ^ 0x9e3779b9;
  let b = Math.floor(parent / 0x100000000) ^ 0x7f4a7c15;
  for (let i = start; i < end; i++) {
    const t = tokens[i] >>> 0;
    a = Math.imul(a ^ t, 0x5bd1e995);
    a ^= a >>> 15;
    b = Math.imul(b ^ t, 0x27d4eb2f) + 0x165667b1;
    b ^= b >>> 13;
  }
  a = fmix(a);
  b = fmix(b ^ a);
  return (b & 0x1fffff) * 0x100000000 + a;
}

/** Seeded randomness for lengths and words (mulberry32). */
export const createRng = mulberry32;

export function randomHex(len: number): string {
  let s = '';
  while (s.length < len) s += Math.floor(Math.random() * 0x100000000).toString(16).padStart(8, '0');
  return s.slice(0, len);
}
