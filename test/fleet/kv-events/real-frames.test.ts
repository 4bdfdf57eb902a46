import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { Publisher, Router } from 'zeromq';
import { decodeFrame, type KvFrame } from '../../../src/fleet/kv-events/decode.js';
import { createKvSubscriber } from '../../../src/fleet/kv-events/subscriber.js';
import { createKvResidency } from '../../../src/routing/kv-residency.js';
import { waitFor } from '../../helpers/wait.js';

// Frames captured from vLLM 0.32 (CPU build) with --kv-events-config; README.txt there says how.
interface Captured { seq: number; topic: string; frames_hex: string[] }
const load = (name: string): Captured[] => JSON.parse(readFileSync(new URL(`../../fixtures/kv-events/${name}`, import.meta.url), 'utf8')).messages;
const bytes = (m: Captured) => m.frames_hex.map((h) => Buffer.from(h, 'hex'));
const stream = load('stream.json');
const frames: KvFrame[] = stream.map((m) => decodeFrame(bytes(m)));

test('real vLLM frames: every message of the run decodes, in sequence, nothing unknown', () => {
  assert.equal(frames.length, 12);
  frames.forEach((f, i) => {
    assert.equal(f.topic, 'kv@r0');
    assert.equal(f.seq, BigInt(i));
    assert.equal(f.batch.unknown, 0);
    assert.equal(f.batch.dpRank, 0);
    assert.ok(f.batch.ts > 1.7e9);
  });
  // Chat A, cold: 22 full blocks of 128 tokens in two chunks, the second chained to the first.
  const [a1, a2] = [frames[0].batch.events[0], frames[1].batch.events[0]];
  assert.ok(a1.type === 'stored' && a2.type === 'stored');
  assert.equal(a1.hashes.length + a2.hashes.length, 22);
  assert.equal(a1.parent, null);
  assert.equal(a2.parent, a1.hashes.at(-1));
  assert.equal(a1.blockSize, 128);
  assert.equal(a1.medium, 'GPU');
  assert.equal(a1.tokenCount, 16 * 128);
  // Every hash a 64-bit key, spelled one way.
  for (const e of frames.flatMap((f) => f.batch.events)) if (e.type !== 'cleared') for (const h of e.hashes) assert.match(h, /^[0-9a-f]{1,16}$/);
  // Chat A again after eviction stores the very same hashes: what routing learns is vLLM's own.
  const again = frames[10].batch.events.find((e) => e.type === 'stored');
  assert.ok(again?.type === 'stored');
  assert.deepEqual(again.hashes, a1.hashes);
});

test('real vLLM frames: the single-message fixtures decode to their kind', () => {
  const stored = decodeFrame(bytes(load('block-stored.json')[0]));
  assert.ok(stored.batch.events.some((e) => e.type === 'stored'));
  const removed = decodeFrame(bytes(load('block-removed.json')[0]));
  assert.ok(removed.batch.events.filter((e) => e.type === 'removed').length > 1);
});

test('real vLLM frames: a request is mapped to its engine blocks, and their eviction is seen', () => {
  const lost: string[] = [];
  const res = createKvResidency({ maxBlocks: 1000, hooks: { lost: (_r, links) => void lost.push(...links), cleared: () => undefined } });
  res.setLive('r0', 0, true);
  res.apply('r0', frames[0].batch.events, 1);
  res.apply('r0', frames[1].batch.events, 2);
  // Chat A: the system prompt and the user message as the gateway's chain (estimated tokens), 2,933 real.
  const outcome = res.learn('r0', ['A:system', 'A:user'], [2925, 2931], 2933, 0);
  assert.deepEqual(outcome, { learned: true, reason: 'learned' });
  assert.deepEqual(res.stats('r0'), { blocks: 22, links: 2 });
  for (const f of frames.slice(2, 4)) res.apply('r0', f.batch.events, 3);
  assert.deepEqual(lost, [], 'chat B stored, nothing of A evicted yet');
  res.apply('r0', frames[4].batch.events, 4);
  assert.deepEqual(lost.sort(), ['A:system', 'A:user'], 'chat C evicted A\'s last blocks first');
});

test('real vLLM replay reply: a subscriber that missed batches gets them from the captured ROUTER frames', async (t) => {
  const pub = new Publisher({ linger: 0 });
  const router = new Router({ linger: 0 });
  await pub.bind('tcp://127.0.0.1:*');
  await router.bind('tcp://127.0.0.1:*');
  const replay = load('replay.json');
  let asked: bigint | null = null;
  void (async () => {
    for await (const [id, , start] of router) {
      asked = start.readBigInt64BE();
      for (const m of replay) await router.send([id, Buffer.alloc(0), ...bytes(m)]);
    }
  })().catch(() => undefined);
  const got: bigint[] = [];
  const seen: string[] = [];
  const sub = createKvSubscriber({
    replica: 'r0', endpoint: pub.lastEndpoint as string, replayEndpoint: router.lastEndpoint as string, topic: 'kv@r0', medium: 'GPU', replayTimeoutMs: 2000, maxPendingBatches: 100,
    observer: { batch: () => void got.push(sub.lastSeq() as bigint), state: (_r, _k, s) => void seen.push(s), gap: () => undefined, replay: (_r, o) => void seen.push(`replay:${o}`), error: (_r, e) => void seen.push(`error:${e}`) },
  });
  t.after(() => {
    sub.close();
    pub.close();
    router.close();
  });
  // Live: seq 0..2 (resent until the SUB has joined), then seq 11: 3..10 were missed.
  await waitFor('the first batches', async () => {
    if (got.length === 0) await pub.send(bytes(stream[0]));
    return got.length > 0;
  }, 5000);
  await pub.send(bytes(stream[1]));
  await pub.send(bytes(stream[2]));
  await waitFor('seq 2', () => sub.lastSeq() === 2n);
  await pub.send(bytes(stream[11]));
  await waitFor('the replay and seq 11', () => sub.lastSeq() === 11n);
  assert.equal(asked, 3n);
  assert.deepEqual(got.slice(-10), [2n, 3n, 4n, 5n, 6n, 7n, 8n, 9n, 10n, 11n]);
  assert.deepEqual(seen, ['live', 'replay:ok']);
});
