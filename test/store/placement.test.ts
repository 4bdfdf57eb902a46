import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createRedisSessionStore, type RedisSessionStore } from '../../src/store/redis.js';
import { createMetrics, type Metrics } from '../../src/telemetry/metrics.js';
import { counterSum, memoryLogger, startRedis, waitFor, type RedisChild } from './redis-server.js';
import { startCluster, startSentinel, type ClusterSetup, type SentinelSetup } from './redis-topologies.js';

const TTL = 60_000;

async function gauge(m: Metrics): Promise<number> {
  return (await m.storeUp.get()).values.find((v) => v.labels.store === 'sessions')?.value ?? NaN;
}

function makeStores(url: () => string, prefix: string) {
  const stores: { s: RedisSessionStore; metrics: Metrics }[] = [];
  return {
    make() {
      const metrics = createMetrics({ defaultMetrics: false });
      const s = createRedisSessionStore({ url: url(), keyPrefix: prefix, maxSessions: 1000, ttlMs: TTL, metrics, log: memoryLogger().log });
      stores.push({ s, metrics });
      return { s, metrics };
    },
    close: () => Promise.allSettled(stores.map(({ s }) => s.close())),
  };
}

describe('placement conflicts between gateways resolve to one winner', () => {
  let redis: RedisChild;
  const pool = makeStores(() => redis.url, 'pc:');
  before(async () => { redis = await startRedis(); });
  after(async () => {
    await pool.close();
    await redis.kill();
  });

  it('two gateways placing the same new session at once: SET NX, the loser follows the winner', async () => {
    const a = pool.make();
    const b = pool.make();
    await Promise.all([a.s.ready(), b.s.ready()]);
    assert.equal(await gauge(a.metrics), 1, 'warmroute_store_up');
    const t = Date.now();
    for (let i = 0; i < 20; i++) {
      // Both decide before either hears of the other.
      a.s.pin(`new-${i}`, 'r1', 10, t);
      b.s.pin(`new-${i}`, 'r2', 10, t);
    }
    const admin = redis.client();
    for (let i = 0; i < 20; i++) {
      await waitFor(`new-${i} agreed`, () => a.s.get(`new-${i}`, Date.now())?.replica === b.s.get(`new-${i}`, Date.now())?.replica, 2_000);
      const inRedis = (await admin.get(`pc:sess:new-${i}`))!.split('|')[0];
      assert.equal(a.s.get(`new-${i}`, Date.now())!.replica, inRedis);
    }
    const lost = await counterSum(a.metrics.storeEvents, ['event', 'lost']) + await counterSum(b.metrics.storeEvents, ['event', 'lost']);
    assert.equal(lost, 20, 'exactly one loser per session');
  });

  it('two moves of one session within the same millisecond: every gateway ends on the same replica', async () => {
    const a = pool.make();
    const b = pool.make();
    const c = pool.make();
    await Promise.all([a.s.ready(), b.s.ready(), c.s.ready()]);
    const t0 = Date.now();
    a.s.pin('moving', 'r0', 10, t0);
    await waitFor('everyone on r0', () => [b, c].every((x) => x.s.get('moving', Date.now())?.replica === 'r0'));
    const t = t0 + 1_000;
    a.s.pin('moving', 'r1', 10, t);
    b.s.pin('moving', 'r3', 10, t);
    c.s.pin('moving', 'r2', 10, t);
    await waitFor('one winner', () => [a, b, c].every((x) => x.s.get('moving', Date.now() + 1_000)?.replica === 'r3'), 2_000);
    assert.match((await redis.client().get('pc:sess:moving'))!, /^r3\|/);
  });

  it('warmroute_store_up goes to 0 while Redis is away', async () => {
    const a = pool.make();
    await a.s.ready();
    assert.equal(await gauge(a.metrics), 1);
    await redis.kill();
    await waitFor('store_up 0', async () => (await gauge(a.metrics)) === 0, 3_000);
    await redis.restart();
    await waitFor('store_up 1', async () => (await gauge(a.metrics)) === 1, 5_000);
    // Both connections back (the subscriber re-subscribes) before the suite closes them.
    await a.s.ready();
    await new Promise((r) => setTimeout(r, 100));
  });
});

describe('Redis Sentinel and Cluster', () => {
  let sentinel: SentinelSetup;
  let cluster: ClusterSetup;
  const viaSentinel = makeStores(() => sentinel.url, 'sn:');
  const viaCluster = makeStores(() => cluster.url, 'cl:');
  // Whichever started is stopped, even when the other did not: a server left running keeps this
  // file's process alive until the runner's timeout.
  const started: { close(): Promise<void> }[] = [];
  before(async () => {
    const [s, c] = await Promise.allSettled([startSentinel(), startCluster()]);
    for (const r of [s, c]) if (r.status === 'fulfilled') started.push(r.value);
    if (s.status === 'rejected') throw s.reason;
    if (c.status === 'rejected') throw c.reason;
    [sentinel, cluster] = [s.value, c.value];
  });
  after(async () => {
    await viaSentinel.close();
    await viaCluster.close();
    await Promise.allSettled(started.map((x) => x.close()));
  });

  it('redis-sentinel://: the master is found through the sentinel and pins are shared', async () => {
    const a = viaSentinel.make();
    const b = viaSentinel.make();
    await Promise.all([a.s.ready(), b.s.ready()]);
    a.s.pin('s1', 'r2', 5, Date.now());
    await waitFor('B hears of it', () => b.s.get('s1', Date.now())?.replica === 'r2');
    assert.match((await sentinel.master.client().get('sn:sess:s1'))!, /^r2\|/);
    assert.equal(await gauge(a.metrics), 1);
  });

  it('redis-cluster://: hash-tagged session keys, pins shared across the cluster', async () => {
    const a = viaCluster.make();
    const b = viaCluster.make();
    await Promise.all([a.s.ready(), b.s.ready()]);
    const keys = Array.from({ length: 30 }, (_, i) => `call-${i}`);
    const t = Date.now();
    for (const k of keys) a.s.pin(k, 'r1', 5, t);
    await waitFor('B hears of every pin', () => keys.every((k) => b.s.get(k, Date.now())?.replica === 'r1'), 3_000);
    const admin = cluster.client();
    for (const k of keys) assert.match((await admin.get(`cl:sess:{${k}}`))!, /^r1\|/);
    // Spread over the cluster's masters (the keys hash to many slots).
    const perNode = await Promise.all(admin.nodes('master').map((n) => n.dbsize()));
    assert.ok(perNode.filter((n) => n > 0).length >= 2, `keys per master: ${perNode}`);
    // A conflict inside the cluster resolves the same way.
    b.s.pin('call-0', 'r2', 5, t + 10);
    a.s.pin('call-0', 'r3', 5, t + 10);
    await waitFor('one winner', () => a.s.get('call-0', Date.now() + 100)?.replica === 'r3' && b.s.get('call-0', Date.now() + 100)?.replica === 'r3', 3_000);
  });
});
