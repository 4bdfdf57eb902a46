import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { KvEvent } from '../../src/routing/kv-residency.js';
import { createRouter } from '../../src/routing/router.js';
import { waitFor } from '../helpers/wait.js';
import { chatIdentity, fleet, prng, store, words } from './helpers.js';

// Exactness per link: a replica's live KV event stream makes exact only the links matched to its
// engine blocks; the others keep their TTL and the cached-token feedback.

function setup() {
  let t = 1_000;
  const evicted: string[] = [];
  const router = createRouter('affinity', {
    store: store(), now: () => t,
    residency: { cachedTokens: () => undefined, evicted: (_r, source) => void evicted.push(source), learned: () => undefined },
  });
  return { router, evicted, at: (ms: number) => void (t = ms), replicas: fleet(1) };
}

const rand = prng(3);
const system = { role: 'system', content: words(400, rand) };
const user = (n: number) => ({ role: 'user', content: `${n} ${words(40, rand)}` });

test('a live stream: links never matched to an engine block still get the cached-token feedback', () => {
  const { router, evicted, at, replicas } = setup();
  router.kvStream('r0', 'live');
  const first = chatIdentity([system, user(1)], 's1');
  router.route({ identity: first, replicas });
  router.served(first, { replica: 'r0', result: 'ok', replicaTtftMs: 50, promptTokens: null, cachedTokens: null });
  // The next turn finds almost nothing cached where the index believed the whole first turn warm.
  at(5_000);
  const next = chatIdentity([system, user(1), { role: 'assistant', content: 'ok' }, user(2)], 's1');
  const d = router.route({ identity: next, replicas });
  assert.ok(d.matchedTokens > 300);
  router.served(next, { replica: 'r0', result: 'ok', replicaTtftMs: 50, promptTokens: null, cachedTokens: 0 });
  assert.deepEqual(evicted, ['feedback'], 'the feedback judged the unmatched links');
  assert.ok(router.stats().retentionByReplica.get('r0')! < 600_000);
});

/** The blocks vLLM would store for a prompt of `tokens` tokens: 16-token blocks, one chain. */
function storedFor(tag: string, tokens: number): KvEvent {
  const n = Math.floor(tokens / 16);
  return { type: 'stored', hashes: Array.from({ length: n }, (_, i) => `${tag}${i}`), parent: null, tokenCount: n * 16, blockSize: 16, medium: 'GPU' };
}

test('a gap no replay fills forgets the links matched on that replica; nothing is matched again until the stream is live', async () => {
  const { router, at, replicas } = setup();
  router.kvStream('r0', 'live');
  const id = chatIdentity([system, user(1)], 's1');
  router.route({ identity: id, replicas });
  at(1_001);
  router.kvEvents('r0', [storedFor('a', id.promptTokens)]);
  router.served(id, { replica: 'r0', result: 'ok', replicaTtftMs: 50, promptTokens: id.promptTokens, cachedTokens: 0 });
  await waitFor('the request matched to its blocks', () => (router.stats().kvBlocksByReplica.get('r0')?.links ?? 0) > 0);
  const believed = router.stats().prefixTokensByReplica.get('r0') ?? 0;
  assert.ok(believed > 0);

  router.kvStream('r0', 'lost');
  assert.deepEqual(router.stats().kvBlocksByReplica.get('r0'), { blocks: 0, links: 0 });
  assert.ok((router.stats().prefixTokensByReplica.get('r0') ?? 0) < believed, 'the matched links are forgotten, not left exact');

  // Not live: a request served now is not matched to the blocks that follow.
  const again = chatIdentity([system, user(2)], 's2');
  at(2_000);
  router.route({ identity: again, replicas });
  at(2_001);
  router.kvEvents('r0', [storedFor('b', again.promptTokens)]);
  router.served(again, { replica: 'r0', result: 'ok', replicaTtftMs: 50, promptTokens: again.promptTokens, cachedTokens: 0 });
  await new Promise((r) => setTimeout(r, 200)); // past the learning delay: a learning would have happened by now
  assert.equal(router.stats().kvBlocksByReplica.get('r0')?.links, 0);
});
