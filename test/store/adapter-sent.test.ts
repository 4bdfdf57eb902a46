import assert from 'node:assert/strict';
import { test } from 'node:test';
import { addAdapterSent, createSessionActivity } from '../../src/store/redis-activity.js';
import type { AdapterSent } from '../../src/store/types.js';

test('a batch of adapter requests sums per replica and adapter, keeps the later time, and holds at most its bound', () => {
  const batch = new Map<string, AdapterSent>();
  addAdapterSent(batch, { replica: 'r1', adapter: 'a', count: 1, at: 20 }, 2);
  addAdapterSent(batch, { replica: 'r1', adapter: 'a', count: 2, at: 10 }, 2);
  addAdapterSent(batch, { replica: 'r2', adapter: 'a', count: 1, at: 30 }, 2);
  assert.deepEqual([...batch.values()], [{ replica: 'r1', adapter: 'a', count: 3, at: 20 }, { replica: 'r2', adapter: 'a', count: 1, at: 30 }]);
  addAdapterSent(batch, { replica: 'r1', adapter: 'b', count: 1, at: 40 }, 2);
  assert.deepEqual([...batch.values()].map((x) => `${x.replica} ${x.adapter}`), ['r2 a', 'r1 b'], 'the oldest pair went');
});

test('the activity channel sends a batch of adapter requests as one message the other gateways read back, and skips its own', async () => {
  const published: string[] = [];
  const counts = { sent: 0, heard: 0, malformed: 0 };
  const make = (instance: string) => createSessionActivity({
    instance, flushMs: 5, maxPending: 100, now: () => 1_000,
    publish: async (m) => { published.push(m); },
    failed: () => {}, sent: () => {},
    sentAdapters: (n) => { counts.sent += n; }, heardAdapters: (n) => { counts.heard += n; }, malformed: () => { counts.malformed++; },
    sentInflight: () => {}, heardInflight: () => {},
  });
  const a = make('ga');
  const b = make('gb');
  const heard: AdapterSent[] = [];
  b.onAdapterSent((s) => heard.push(s));
  a.announceAdapter({ replica: 'r1', adapter: 'x', count: 1, at: 900 }, false);
  a.announceAdapter({ replica: 'r1', adapter: 'x', count: 1, at: 950 }, false);
  // A placement goes at once, with what is queued.
  a.announceAdapter({ replica: 'r2', adapter: 'y', count: 1, at: 2_000 }, true);
  assert.equal(published.length, 1);
  await Promise.resolve();
  assert.equal(counts.sent, 2);
  for (const m of published) { a.receive(m); b.receive(m); }
  // Another gateway's clock is never taken to be ahead of this one's.
  assert.deepEqual(heard, [{ replica: 'r1', adapter: 'x', count: 2, at: 950 }, { replica: 'r2', adapter: 'y', count: 1, at: 1_000 }]);
  assert.equal(counts.heard, 2);
  assert.equal(counts.malformed, 0);
  a.close();
  b.close();
});
