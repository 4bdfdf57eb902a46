/**
 * Issue 17 #4: a gateway whose subscriber missed moves (a pub/sub gap) catches up: it reads its
 * pins back once the subscriber is back, and its TTL refresh compares what Redis holds instead of
 * a blind PEXPIRE. Real redis-server; the gap is a real outage of one gateway's connections.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { createRedisSessionStore, type RedisSessionStore } from '../../src/store/redis.js';
import { createMetrics } from '../../src/telemetry/metrics.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';
import { counterSum, memoryLogger, startRedis, waitFor, type RedisChild } from './redis-server.js';

describe('redis session store after a pub/sub gap (issue 17 #4)', () => {
  let redis: RedisChild;
  let admin: Redis;
  let proxy: TcpProxy;
  const stores: RedisSessionStore[] = [];
  const make = (url: string, prefix: string, ttlMs = 60_000) => {
    const { log } = memoryLogger();
    const metrics = createMetrics({ defaultMetrics: false });
    const s = createRedisSessionStore({ url, keyPrefix: prefix, maxSessions: 1000, ttlMs, metrics, log, maxReconnectDelayMs: 100 });
    stores.push(s);
    return { s, metrics };
  };
  before(async () => {
    redis = await startRedis();
    admin = redis.client();
    proxy = await startTcpProxy(redis.port);
  });
  after(async () => {
    await Promise.allSettled(stores.map((s) => s.close()));
    await proxy.close();
    await redis.kill();
  });

  it('moves published while a gateway\'s subscriber was away are applied once it is back', async () => {
    const { s: a } = make(redis.url, 'gap:');
    const { s: b, metrics: mb } = make(`redis://127.0.0.1:${proxy.port}`, 'gap:');
    await Promise.all([a.ready(), b.ready()]);
    const t0 = Date.now();
    for (let i = 0; i < 5; i++) a.pin(`s${i}`, 'r1', 0, t0);
    await waitFor('B to hear of the pins', () => b.size() === 5, 2_000);
    // B's connections to Redis go away; meanwhile A moves three sessions (their messages are lost to B).
    proxy.cut();
    await new Promise((r) => setTimeout(r, 200));
    const t1 = Date.now();
    for (const k of ['s0', 's2', 's4']) a.pin(k, 'r2', 0, t1);
    await waitFor('the moves in Redis', async () => (await admin.get('gap:sess:s4'))?.startsWith('r2|') === true, 2_000);
    assert.equal(b.get('s0', Date.now())?.replica, 'r1', 'B missed them');
    proxy.restore();
    await waitFor('B to catch up with every move', () => ['s0', 's2', 's4'].every((k) => b.get(k, Date.now())?.replica === 'r2'), 5_000);
    for (const k of ['s1', 's3']) assert.equal(b.get(k, Date.now())?.replica, 'r1', `${k} did not move`);
    assert.equal(await counterSum(mb.storeEvents, ['event', 'gap_corrected']), 3);
  });

  it('the TTL refresh of an unmoved pin notices that Redis holds another placement, and follows it', async () => {
    const ttl = 800; // refreshed at most once per 200 ms of use
    const { s: b, metrics: mb } = make(redis.url, 'rf:', ttl);
    await b.ready();
    const t0 = Date.now();
    b.pin('k', 'r1', 0, t0);
    await waitFor('the pin in Redis', async () => (await admin.get('rf:sess:k'))?.startsWith('r1|') === true, 2_000);
    // Another gateway's move whose message never reached B (written, not published).
    await admin.set('rf:sess:k', `r2|${t0 + 1}|0`, 'PX', ttl);
    // B's turns go on: each quarter TTL one refreshes the pin.
    await waitFor('B to follow the placement Redis holds', () => {
      b.pin('k', b.get('k', Date.now())?.replica ?? 'r1', 0, Date.now());
      return b.get('k', Date.now())?.replica === 'r2';
    }, 3_000);
    assert.ok((await admin.get('rf:sess:k'))?.startsWith('r2|'), 'and leaves it in Redis');
    assert.equal(await counterSum(mb.storeEvents, ['event', 'refresh_moved']), 1);
  });
});
