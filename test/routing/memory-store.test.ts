import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createMemorySessionStore } from '../../src/store/memory.js';

describe('memory session store', () => {
  it('pins, keeps `since` while the replica is unchanged, resets it on a move', () => {
    const s = createMemorySessionStore({ maxSessions: 10, ttlMs: 1000 });
    s.pin('k', 'r0', 100, 0);
    s.pin('k', 'r0', 200, 50);
    assert.deepEqual(s.get('k', 60), { key: 'k', replica: 'r0', since: 0, lastSeen: 50, warmTokens: 200 });
    s.pin('k', 'r1', 300, 70);
    assert.equal(s.get('k', 80)?.since, 70);
  });

  it('forgets a pin unused for longer than the TTL', () => {
    const s = createMemorySessionStore({ maxSessions: 10, ttlMs: 1000 });
    s.pin('k', 'r0', 0, 0);
    assert.notEqual(s.get('k', 1000), null);
    assert.equal(s.get('k', 1001), null);
    assert.equal(s.size(), 0);
  });

  it('drops the least recently pinned session past maxSessions', () => {
    const s = createMemorySessionStore({ maxSessions: 2, ttlMs: 1000 });
    s.pin('a', 'r0', 0, 0);
    s.pin('b', 'r0', 0, 1);
    s.pin('a', 'r0', 0, 2);
    s.pin('c', 'r1', 0, 3);
    assert.equal(s.get('b', 3), null);
    assert.deepEqual(Object.fromEntries(s.countsByReplica(3)), { r0: 1, r1: 1 });
    assert.equal(s.unpin('a'), true);
    assert.equal(s.unpin('a'), false);
  });
});
