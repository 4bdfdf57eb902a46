// Where a realtime connection goes: the session's replica, else the fewest open; never a replica down, draining, full or not serving the model.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pickRealtime, type RealtimeCandidate } from '../../src/routing/realtime-pick.js';

const r = (name: string, o: Partial<RealtimeCandidate> = {}): RealtimeCandidate => ({ name, up: true, draining: false, models: new Set(['asr']), ...o });
const base = { model: null, pinned: null, maxPerReplica: 0, exclude: new Set<string>(), turn: 0 };

describe('realtime pick', () => {
  it('ranks by open connections, the session\'s replica first', () => {
    const counts: Record<string, number> = { a: 3, b: 1, c: 2 };
    const open = (n: string) => counts[n];
    assert.deepEqual(pickRealtime({ ...base, replicas: [r('a'), r('b'), r('c')], open }), { ranked: ['b', 'c', 'a'], reason: 'least_connections' });
    assert.deepEqual(pickRealtime({ ...base, replicas: [r('a'), r('b'), r('c')], open, pinned: 'a' }), { ranked: ['a', 'b', 'c'], reason: 'pinned' });
    assert.deepEqual(pickRealtime({ ...base, replicas: [r('a'), r('b'), r('c')], open, pinned: 'a', exclude: new Set(['a']) }), { ranked: ['b', 'c'], reason: 'failover' });
  });

  it('spreads ties by turn', () => {
    const open = () => 0;
    const firsts = new Set([0, 1, 2].map((turn) => pickRealtime({ ...base, replicas: [r('a'), r('b'), r('c')], open, turn }).ranked![0]));
    assert.equal(firsts.size, 3);
  });

  it('skips what cannot take it, and says why none can', () => {
    const open = (n: string) => (n === 'full' ? 2 : 0);
    assert.deepEqual(pickRealtime({ ...base, replicas: [r('down', { up: false }), r('drain', { draining: true })], open }), { ranked: null, why: 'none' });
    assert.deepEqual(pickRealtime({ ...base, replicas: [r('llm', { models: new Set(['chat']) })], open, model: 'asr' }), { ranked: null, why: 'model' });
    assert.deepEqual(pickRealtime({ ...base, replicas: [r('full')], open, maxPerReplica: 2 }), { ranked: null, why: 'full' });
    assert.deepEqual(pickRealtime({ ...base, replicas: [r('llm', { models: new Set(['chat']) }), r('unread', { models: null }), r('full'), r('drain', { draining: true })], open, model: 'asr', maxPerReplica: 2, pinned: 'drain' }), { ranked: ['unread'], reason: 'least_connections' });
  });
});
