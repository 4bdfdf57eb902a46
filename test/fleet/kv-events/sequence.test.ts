import assert from 'node:assert/strict';
import { test } from 'node:test';
import { encode } from '@msgpack/msgpack';
import { encodeSeq } from '../../../src/fleet/kv-events/decode.js';
import { createStreamSequence, PROVE_BATCHES, type KvStreamObserver, type ReplayResult } from '../../../src/fleet/kv-events/sequence.js';

// A stream's sequence without sockets: what state each run of frames leaves it in.

function harness(replay: ((from: bigint, upTo: bigint) => Promise<ReplayResult>) | null = null) {
  const log: string[] = [];
  const batches: number[] = [];
  const observer: KvStreamObserver = {
    batch: (_r, _rank, events) => void batches.push(events.length),
    state: (_r, _rank, s, why) => void log.push(`${s}:${why}`),
    gap: (_r, n) => void log.push(`gap:${n}`),
    replay: (_r, o) => void log.push(`replay:${o}`),
    error: (_r, reason) => void log.push(`error:${reason}`),
  };
  const seq = createStreamSequence({ replica: 'r0', rank: 0, medium: 'GPU', maxPendingBatches: 100, observer, replay });
  const stored = { type: 'BlockStored', block_hashes: [1, 2], parent_block_hash: null, token_ids: [], block_size: 16, lora_id: null, medium: 'GPU', lora_name: null };
  const frame = (n: number, payload: Uint8Array = encode({ ts: 0, events: [stored] })) => seq.frame([Buffer.from('kv'), encodeSeq(BigInt(n)), payload]);
  return { seq, log, batches, frame };
}

test('an undecodable payload is counted and skipped; its sequence still advances, so the next batch is no gap', () => {
  const h = harness();
  h.frame(0);
  h.frame(1, Uint8Array.from([0xc1])); // 0xc1: never used in msgpack
  h.frame(2);
  assert.equal(h.seq.lastSeq(), 2n);
  assert.deepEqual(h.log, ['live:first_batch', 'error:msgpack']);
  assert.equal(h.seq.state(), 'live');
});

test('an undecodable event is counted and skipped; the rest of its batch is applied', () => {
  const h = harness();
  const bad = { type: 'BlockStored', block_hashes: 'not a list', parent_block_hash: null, token_ids: [], block_size: 16, lora_id: null, medium: 'GPU', lora_name: null };
  const good = { type: 'BlockRemoved', block_hashes: [3], medium: 'GPU' };
  h.frame(0, encode({ ts: 0, events: [bad, good] }));
  h.frame(1);
  assert.deepEqual(h.batches, [1, 1]);
  assert.deepEqual(h.log, ['live:first_batch', 'error:undecodable_event']);
  assert.equal(h.seq.state(), 'live');
});

test('a gap with no replay socket: lost, then proving; live only after PROVE_BATCHES in order, a new gap starts the proof over', () => {
  const h = harness();
  h.frame(0);
  h.frame(2);
  assert.deepEqual(h.log, ['live:first_batch', 'gap:1', 'replay:none', 'lost:gap_none', 'proving:new_start']);
  assert.equal(h.seq.state(), 'proving');
  // The batch that starts over is the proof's first.
  let n = 3;
  for (; n < 2 + PROVE_BATCHES - 1; n++) h.frame(n);
  assert.equal(h.seq.state(), 'proving');
  h.frame(n + 1); // another gap while proving: the proof starts over
  assert.deepEqual(h.log.slice(-2), ['lost:gap_none', 'proving:new_start']);
  n += 2;
  for (let i = 0; i < PROVE_BATCHES - 2; i++) h.frame(n++);
  assert.equal(h.seq.state(), 'proving');
  h.frame(n++);
  assert.equal(h.seq.state(), 'live');
  assert.equal(h.log.at(-1), 'live:resynced');
});

test('a replayed gap keeps the stream live; a failed replay loses it', async () => {
  const ok = harness(async (from, upTo) => ({ got: Array.from({ length: Number(upTo - from) }, (_, i) => ({ seq: from + BigInt(i), batch: { ts: 0, events: [], dpRank: null, unknown: 0, undecodable: 0 } })), outcome: 'ok' }));
  ok.frame(0);
  ok.frame(3);
  await new Promise<void>((r) => setImmediate(r));
  assert.equal(ok.seq.state(), 'live');
  assert.equal(ok.seq.lastSeq(), 3n);
  const failed = harness(async () => ({ got: [], outcome: 'timeout' }));
  failed.frame(0);
  failed.frame(3);
  await new Promise<void>((r) => setImmediate(r));
  assert.deepEqual(failed.log.slice(1), ['gap:2', 'replay:timeout', 'lost:gap_timeout', 'proving:new_start']);
});
