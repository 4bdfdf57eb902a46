import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createRouter } from '../../src/routing/router.js';
import { chatIdentity, fleet, prng, store, words } from './helpers.js';

// Per-replica state goes with the replica: a departed replica's KV capacity no longer counts in
// the warmup's pressure test, and its residency and prefix-index entries are gone.

test('a replica that left: its capacity, residency and index entries go with it', () => {
  const router = createRouter('affinity', { store: store(), now: () => 1_000 });
  const rand = prng(5);
  const replicas = fleet(3, { kvCapacityTokens: 10_000 });
  for (let i = 0; i < 6; i++) {
    const id = chatIdentity([{ role: 'system', content: words(200, rand) }, { role: 'user', content: `${i}` }], `s${i}`);
    const d = router.route({ identity: id, replicas });
    router.served(id, { replica: d.ranked[0].name, result: 'ok', replicaTtftMs: 50, promptTokens: null, cachedTokens: null });
  }
  router.kvStream('r2', 'live');
  router.kvEvents('r2', [{ type: 'stored', hashes: ['h1'], parent: null, tokenCount: 16, blockSize: 16, medium: 'GPU' }]);
  assert.deepEqual([...router.stats().workingSetTokensByReplica.keys()].sort(), ['r0', 'r1', 'r2']);
  router.replicaLeft('r2');
  const st = router.stats();
  assert.deepEqual([...st.workingSetTokensByReplica.keys()].sort(), ['r0', 'r1'], 'its capacity no longer counts');
  assert.equal(st.kvBlocksByReplica.has('r2'), false);
  assert.equal(st.prefixTokensByReplica.has('r2'), false);
});
