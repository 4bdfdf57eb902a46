import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createRouter, STRATEGIES } from '../../src/routing/router.js';
import { chatIdentity, conversation, fleet, keyIdentity, prng, replica, store, words } from './helpers.js';

describe('baseline strategies', () => {
  it('STRATEGIES lists warmroute and its three baselines', () => {
    assert.deepEqual([...STRATEGIES].sort(), ['affinity', 'least-loaded', 'round-robin', 'session-hash']);
    for (const s of STRATEGIES) assert.equal(createRouter(s, { store: store() }).strategy, s);
  });

  it('session-hash: a key stays on its ring owner however loaded it is (no bound, reason hash)', () => {
    const replicas = fleet(4);
    const router = createRouter('session-hash', { store: store() });
    const first = router.route({ identity: keyIdentity('call-1'), replicas });
    assert.equal(first.reason, 'hash');
    (first.ranked[0] as ReturnType<typeof replica>).inflight = 1000;
    assert.equal(router.route({ identity: keyIdentity('call-1'), replicas }).ranked[0].name, first.ranked[0].name);
  });

  it('session-hash: keys spread over the ring in proportion to weight', () => {
    const replicas = [replica('a', { weight: 2 }), replica('b'), replica('c'), replica('d')];
    const router = createRouter('session-hash', { store: store() });
    const counts = new Map<string, number>();
    for (let i = 0; i < 10_000; i++) {
      const name = router.route({ identity: keyIdentity(`k${i}`), replicas }).ranked[0].name;
      counts.set(name, (counts.get(name) ?? 0) + 1);
    }
    assert.ok(Math.abs((counts.get('a') ?? 0) / 10_000 - 0.4) < 0.05, `${[...counts]}`);
    for (const n of ['b', 'c', 'd']) assert.ok(Math.abs((counts.get(n) ?? 0) / 10_000 - 0.2) < 0.05, `${[...counts]}`);
  });

  it('session-hash: keyless requests rotate by default, or hash the first user turn when asked', () => {
    const replicas = fleet(3);
    const system = words(100, prng(1));
    const conv = conversation(system, 4, prng(2));
    const rr = createRouter('session-hash', { store: store() });
    const rotated = [1, 2, 3].map((t) => rr.route({ identity: chatIdentity(conv.messages(t)), replicas }));
    assert.deepEqual(rotated.map((d) => d.reason), ['round-robin', 'round-robin', 'round-robin']);
    assert.equal(new Set(rotated.map((d) => d.ranked[0].name)).size, 3);
    const ft = createRouter('session-hash', { store: store(), options: { sessionHashKeyless: 'first-turn' } });
    const hashed = [1, 2, 3, 4].map((t) => ft.route({ identity: chatIdentity(conv.messages(t)), replicas }));
    assert.deepEqual(new Set(hashed.map((d) => d.reason)), new Set(['hash']));
    assert.equal(new Set(hashed.map((d) => d.ranked[0].name)).size, 1);
  });

  it('round-robin: each healthy replica in turn (reason round-robin)', () => {
    const replicas = [replica('a'), replica('b', { up: false }), replica('c')];
    const router = createRouter('round-robin', { store: store() });
    const got = [0, 1, 2, 3].map(() => router.route({ identity: keyIdentity('x'), replicas }));
    assert.deepEqual(got.map((d) => d.ranked[0].name), ['a', 'c', 'a', 'c']);
    assert.equal(got[0].reason, 'round-robin');
  });

  it('least-loaded: the replica with the fewest requests per weight, counting vLLM’s own queue', () => {
    const replicas = [replica('a', { inflight: 3 }), replica('b', { running: 2, waiting: 2 }), replica('c', { inflight: 4, weight: 2 })];
    const router = createRouter('least-loaded', { store: store() });
    const d = router.route({ identity: keyIdentity(null), replicas });
    assert.deepEqual(d.ranked.map((r) => r.name), ['c', 'a', 'b']);
    assert.equal(d.reason, 'least-loaded');
  });
});
