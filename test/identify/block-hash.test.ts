import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { kernelChain, kernelMemory, kernelXxh64 } from '../../src/identify/block-hash.js';
import { xx } from '../../src/identify/hash.js';
import { prng } from '../routing/helpers.js';

describe('block-hash kernel', () => {
  it('is XXH64: equal to xxhash-wasm for every length 0–300 (all code paths: stripes, 8/4/1-byte tails) and edge seeds', () => {
    const rand = prng(1);
    for (let len = 0; len <= 300; len++) {
      const mem = kernelMemory(512);
      for (let i = 0; i < len; i++) mem[i] = Math.floor(rand() * 256);
      const bytes = mem.slice(0, len);
      for (const seed of [0n, 1n, 0x9e3779b185ebca87n, 0xffffffffffffffffn]) {
        assert.equal(kernelXxh64(0, len, BigInt.asIntN(64, seed)), xx.h64Raw(bytes, seed), `len ${len} seed ${seed}`);
      }
    }
  });

  const cases: [string, number, number][] = [
    ['whole blocks', 640, 64],
    ['a partial last block', 1000, 64],
    ['one short block', 10, 64],
    ['odd block size', 777, 48],
  ];
  for (const [name, len, block] of cases) {
    it(`chains links as xxh64(block, previous link) in 16 hex digits: ${name}`, () => {
      const rand = prng(len);
      const data = new Uint8Array(len).map(() => Math.floor(rand() * 256));
      kernelMemory(len).set(data);
      const got = kernelChain(len, block, 12345n);
      let seed = 12345n;
      const want: string[] = [];
      for (let from = 0; from < len; from += block) {
        seed = xx.h64Raw(data.subarray(from, Math.min(from + block, len)), seed);
        want.push(seed.toString(16).padStart(16, '0'));
      }
      assert.deepEqual(got, want);
    });
  }

  it('grows its memory for a large prompt and keeps working', () => {
    const len = 3 * 1024 * 1024;
    const mem = kernelMemory(len);
    mem.fill(7, 0, len);
    assert.equal(kernelChain(len, 64, 0n).length, len / 64);
  });
});
