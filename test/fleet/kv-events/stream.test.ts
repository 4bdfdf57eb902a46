import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import type { SimReplica } from '../../../bench/sim/index.js';
import { createKvSubscriber, type KvStreamObserver, type StreamState } from '../../../src/fleet/kv-events/subscriber.js';
import type { KvEvent } from '../../../src/routing/kv-residency.js';
import { FAST, postJson, replica } from '../../sim/helpers.js';
import { waitFor } from '../../helpers/wait.js';

// Real sockets: a simulated replica publishing vLLM's KV events, the gateway's subscriber reading them.

interface Seen {
  events: KvEvent[];
  batches: number;
  states: [StreamState | 'proving', string][];
  gaps: number[];
  replays: string[];
  errors: string[];
}

function observe(): { seen: Seen; observer: KvStreamObserver } {
  const seen: Seen = { events: [], batches: 0, states: [], gaps: [], replays: [], errors: [] };
  return {
    seen,
    observer: {
      batch: (_r, _rank, events) => {
        seen.batches++;
        seen.events.push(...events);
      },
      state: (_r, _rank, s, why) => void seen.states.push([s, why]),
      gap: (_r, n) => void seen.gaps.push(n),
      replay: (_r, o) => void seen.replays.push(o),
      error: (_r, reason) => void seen.errors.push(reason),
    },
  };
}

function subscribe(t: TestContext, r: SimReplica, observer: KvStreamObserver, replay = true) {
  const kv = r.kvEvents!;
  const sub = createKvSubscriber({ replica: r.name, endpoint: kv.endpoint, replayEndpoint: replay ? kv.replayEndpoint : null, topic: '', medium: 'GPU', replayTimeoutMs: 1000, maxPendingBatches: 100, observer });
  t.after(() => sub.close());
  return sub;
}

const words = (tag: string, n: number) => Array.from({ length: n }, (_, i) => `${tag}${i}`).join(' ');
const chat = (r: SimReplica, content: string) => postJson(r.url, '/v1/chat/completions', { model: r.config.model, max_tokens: 2, messages: [{ role: 'user', content }] });

/** ZMQ subscriptions take a moment to reach the publisher: requests until a first batch arrives. */
async function untilLive(r: SimReplica, seen: Seen): Promise<void> {
  let i = 0;
  await waitFor('the first KV event batch', async () => {
    if (seen.batches > 0) return true;
    await chat(r, words(`warm${i++}-`, 40));
    return seen.batches > 0;
  }, 5000);
}

for (const shape of ['map', 'array'] as const) {
  test(`a simulated replica publishes BlockStored for a prompt's full blocks (${shape} shape)`, async (t) => {
    const r = await replica(t, { ...FAST, kvEvents: { shape } });
    const { seen, observer } = observe();
    subscribe(t, r, observer);
    await untilLive(r, seen);
    const before = seen.events.length;
    const res = await chat(r, words('hello', 100));
    assert.equal(res.status, 200);
    await waitFor('stored events of the request', () => seen.events.slice(before).some((e) => e.type === 'stored'));
    const stored = seen.events.slice(before).filter((e) => e.type === 'stored');
    const blocks = stored.reduce((n, e) => n + (e.type === 'stored' ? e.hashes.length : 0), 0);
    // One block per full 16 tokens of the prompt, and one more if the 2 tokens generated filled another.
    const P = res.json.usage.prompt_tokens;
    assert.ok(blocks >= Math.floor(P / 16) && blocks <= Math.floor((P + 2) / 16), `${blocks} blocks for ${P} prompt tokens`);
    const first = stored[0];
    assert.ok(first.type === 'stored' && first.blockSize === 16 && first.medium === 'GPU');
    assert.equal(first.tokenCount, first.hashes.length * 16);
    assert.deepEqual(seen.states[0], ['live', 'first_batch']);
    assert.deepEqual(seen.errors, []);
  });
}

test('eviction: a full pool publishes BlockRemoved for the blocks it hands out again', async (t) => {
  const r = await replica(t, { ...FAST, kvEvents: true, kvBlocks: 64, maxModelLen: 1024 });
  const { seen, observer } = observe();
  subscribe(t, r, observer);
  await untilLive(r, seen);
  for (let i = 0; i < 4; i++) await chat(r, words(`fill${i}-`, 300));
  await waitFor('removed events', () => seen.events.some((e) => e.type === 'removed'));
});

test('padBlocks (a bench knob): each stored block is followed by that many blocks no pool holds, chained under it', async (t) => {
  const r = await replica(t, { ...FAST, kvEvents: { padBlocks: 3 } });
  const { seen, observer } = observe();
  subscribe(t, r, observer);
  await untilLive(r, seen);
  const before = seen.events.length;
  assert.equal((await chat(r, words('padded', 100))).status, 200);
  await waitFor('stored events of the request', () => seen.events.slice(before).some((e) => e.type === 'stored'));
  const stored = seen.events.slice(before).filter((e) => e.type === 'stored');
  const real = stored.filter((e) => e.type === 'stored' && e.hashes.length !== 3);
  const pads = stored.filter((e) => e.type === 'stored' && e.hashes.length === 3);
  const realHashes = real.flatMap((e) => (e.type === 'stored' ? e.hashes : []));
  assert.ok(realHashes.length > 0);
  // One pad event per real block, each chained under that block, with hashes no real block has.
  assert.equal(pads.length, realHashes.length);
  for (const p of pads) assert.ok(p.type === 'stored' && p.parent !== null && realHashes.includes(p.parent));
  const padHashes = new Set(pads.flatMap((e) => (e.type === 'stored' ? e.hashes : [])));
  assert.equal(padHashes.size, 3 * pads.length);
  for (const h of realHashes) assert.ok(!padHashes.has(h));
});

test('a gap is filled from the replay socket, in order', async (t) => {
  const r = await replica(t, { ...FAST, kvEvents: true });
  const { seen, observer } = observe();
  const sub = subscribe(t, r, observer);
  await untilLive(r, seen);
  await waitFor('caught up', () => sub.lastSeq() === BigInt(r.kvEvents!.nextSeq() - 1));
  const [b0, s0] = [seen.batches, r.kvEvents!.nextSeq()];
  r.kvEvents!.dropNext(1);
  await chat(r, words('dropped', 64));
  await chat(r, words('after', 64));
  await waitFor('the replay', () => seen.replays.length > 0 && sub.lastSeq() === BigInt(r.kvEvents!.nextSeq() - 1));
  assert.deepEqual(seen.replays, ['ok']);
  assert.deepEqual(seen.gaps, [1]);
  assert.equal(seen.batches - b0, r.kvEvents!.nextSeq() - s0, 'every batch delivered, the dropped one by the replay');
  assert.equal(seen.states.some(([s]) => s === 'lost'), false);
});

test('a gap with no replay socket loses exactness, then the stream is live again in order', async (t) => {
  const r = await replica(t, { ...FAST, kvEvents: true });
  const { seen, observer } = observe();
  subscribe(t, r, observer, false);
  await untilLive(r, seen);
  r.kvEvents!.dropNext(1);
  await chat(r, words('dropped', 64));
  await chat(r, words('after', 64));
  await waitFor('lost', () => seen.states.some(([s]) => s === 'lost'));
  // Not exact again in the same tick: proving itself, live only after PROVE_BATCHES in order.
  assert.deepEqual(seen.states.slice(-2), [['lost', 'gap_none'], ['proving', 'new_start']]);
  let i = 0;
  await waitFor('live again', async () => {
    if (seen.states.at(-1)?.[0] === 'live') return true;
    await chat(r, words(`more${i++}-`, 64));
    return false;
  }, 10_000);
  assert.ok(i >= 1, 'not live again without more batches in order');
  assert.deepEqual(seen.replays, ['none']);
  assert.deepEqual(seen.states.at(-1), ['live', 'resynced']);
});

test('a restarted replica (sequence back to 0) is seen as restarted', async (t) => {
  const r = await replica(t, { ...FAST, kvEvents: true });
  const { seen, observer } = observe();
  subscribe(t, r, observer);
  await untilLive(r, seen);
  await chat(r, words('before', 64));
  await waitFor('a few batches', () => seen.batches >= 2);
  r.fault({ kind: 'restart' });
  await chat(r, words('after', 64));
  await waitFor('restarted', () => seen.states.some(([s]) => s === 'restarted'));
  assert.deepEqual(seen.states.find(([s]) => s === 'restarted'), ['restarted', 'sequence_reset']);
});
