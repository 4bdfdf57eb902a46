import assert from 'node:assert/strict';
import { test } from 'node:test';
import { encode } from '@msgpack/msgpack';
import { blockKeyOf, decodeBatch, decodeFrame, encodeSeq, KvDecodeError, ofMedium } from '../../../src/fleet/kv-events/decode.js';

// Frames built from vLLM's documented format (vllm/distributed/kv_events.py): the positional shape
// of msgspec array_like structs, and the tagged maps of the 2026 releases.
const big = (2n ** 63n) + 5n; // above 2^53: a double would lose it
const positional = [1_765_000_000.5, [
  ['BlockStored', [big, 7], null, [1, 2, 3, 4, 5, 6, 7, 8], 4, null, 'GPU'],
  ['BlockStored', [-3], 7, [9, 9, 9, 9], 4, null], // trailing defaults omitted (an older release)
  ['BlockRemoved', [7], 'CPU'],
  ['AllBlocksCleared'],
  ['SomethingNew', 1],
], 0];
const tagged = {
  ts: 1_765_000_001.25,
  events: [
    { type: 'BlockStored', block_hashes: [Uint8Array.from([0xab, 0x01, 0xff])], parent_block_hash: null, token_ids: [1, 2, 3, 4], block_size: 4, lora_id: null, medium: 'GPU', lora_name: null },
    { type: 'BlockRemoved', block_hashes: [Uint8Array.from([0xab, 0x01, 0xff])], medium: 'GPU' },
    { type: 'AllBlocksCleared' },
  ],
};

test('positional batches decode, 64-bit hashes keep every bit, unknown events are counted', () => {
  const b = decodeBatch(encode(positional, { useBigInt64: true }));
  assert.equal(b.ts, 1_765_000_000.5);
  assert.equal(b.dpRank, 0);
  assert.equal(b.unknown, 1);
  assert.deepEqual(b.events.map((e) => e.type), ['stored', 'stored', 'removed', 'cleared']);
  const s = b.events[0];
  assert.ok(s.type === 'stored');
  assert.deepEqual(s.hashes, [big.toString(16), '7']);
  assert.equal(s.parent, null);
  assert.equal(s.tokenCount, 8);
  assert.equal(s.blockSize, 4);
  assert.equal(s.medium, 'GPU');
  const old = b.events[1];
  assert.ok(old.type === 'stored');
  assert.equal(old.parent, '7');
  assert.equal(old.medium, null);
  assert.deepEqual(old.hashes, [BigInt.asUintN(64, -3n).toString(16)]);
});

test('tagged-map batches decode; byte hashes are hex', () => {
  const b = decodeBatch(encode(tagged));
  assert.equal(b.dpRank, null);
  assert.deepEqual(b.events.map((e) => e.type), ['stored', 'removed', 'cleared']);
  const s = b.events[0];
  assert.ok(s.type === 'stored');
  assert.deepEqual(s.hashes, ['ab01ff']);
});

test('one hash spelled the same whether it came as a small int, a bigint or a number', () => {
  assert.equal(blockKeyOf(7), blockKeyOf(7n));
  assert.equal(blockKeyOf(-1), 'ffffffffffffffff');
  assert.throws(() => blockKeyOf('x'), KvDecodeError);
});

test('frames: topic, big-endian sequence, payload; wrong frames are refused with a reason', () => {
  const f = decodeFrame([Buffer.from('kv@r0'), encodeSeq(258n), Buffer.from(encode(tagged))]);
  assert.equal(f.topic, 'kv@r0');
  assert.equal(f.seq, 258n);
  assert.equal(Buffer.from([0, 0, 0, 0, 0, 0, 1, 2]).equals(encodeSeq(258n)), true);
  assert.throws(() => decodeFrame([Buffer.from('t'), Buffer.alloc(8)]), (e: unknown) => e instanceof KvDecodeError && e.reason === 'frames');
  assert.throws(() => decodeFrame([Buffer.from('t'), Buffer.alloc(4), Buffer.alloc(1)]), (e: unknown) => e instanceof KvDecodeError && e.reason === 'sequence');
  assert.throws(() => decodeBatch(Buffer.from([0xc1])), (e: unknown) => e instanceof KvDecodeError && e.reason === 'msgpack');
  assert.throws(() => decodeBatch(encode({ ts: 1 })), (e: unknown) => e instanceof KvDecodeError && e.reason === 'shape');
});

test('medium filter: GPU by default keeps untagged events and drops the CPU tier', () => {
  const b = decodeBatch(encode(positional, { useBigInt64: true }));
  assert.deepEqual(ofMedium(b.events, 'GPU').map((e) => e.type), ['stored', 'stored', 'cleared']);
  assert.deepEqual(ofMedium(b.events, 'cpu').map((e) => e.type), ['removed', 'cleared']);
});
