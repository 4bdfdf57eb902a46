/**
 * The shared drain hash over time: a drain for a replica a gateway does not have yet is applied
 * when the replica appears there (and again if it leaves and comes back); an entry no gateway
 * has the replica for expires. Two drain-state clients on a real redis-server.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import pino from 'pino';
import { createSharedDrains, expireDrainEntry, withExpireDrain, type SharedDrains } from '../../src/store/redis-drains.js';
import { createMetrics } from '../../src/telemetry/metrics.js';
import { startRedis, waitFor, type RedisChild } from './redis-server.js';

describe('shared drain entries', () => {
  let redis: RedisChild;
  const open: SharedDrains[] = [];
  before(async () => {
    redis = await startRedis();
  });
  after(async () => {
    await Promise.allSettled(open.map((d) => d.close()));
    await redis.kill();
  });

  /** A gateway's view: the replicas it has and whether each drains. */
  function gateway(prefix: string, has: Map<string, boolean>, entryTtlMs?: number) {
    const d = createSharedDrains({
      url: redis.url, keyPrefix: prefix, metrics: createMetrics(), log: pino({ level: 'silent' }), entryTtlMs,
      apply: (name, draining) => { if (has.has(name)) has.set(name, draining); },
      draining: (name) => has.get(name) ?? null,
    });
    open.push(d);
    return d;
  }

  it('a drain for a replica this gateway has not discovered yet is applied when it appears, and after it comes back', async () => {
    const a = new Map([['r1', false]]);
    const b = new Map<string, boolean>();
    const ga = gateway('late:', a);
    gateway('late:', b);
    a.set('r1', true);
    ga.set('r1', true);
    await new Promise((r) => setTimeout(r, 1_200)); // B polls twice without the replica
    b.set('r1', false); // discovered now
    await waitFor('B drains it', () => b.get('r1') === true, 2_000);
    b.delete('r1');
    b.set('r1', false); // left and came back as a new replica state
    await waitFor('B drains it again', () => b.get('r1') === true, 2_000);
  });

  it('an entry no gateway has the replica for expires; one a gateway has is kept fresh', async () => {
    const a = new Map([['kept', true]]);
    const ga = gateway('ttl:', a, 600);
    ga.set('kept', true);
    const conn = new Redis(redis.url);
    try {
      await conn.hset('ttl:drains', 'gone', `${Date.now()}`);
      await waitFor('the entry of a replica nobody has deleted', async () => !('gone' in (await conn.hgetall('ttl:drains'))), 3_000);
      assert.ok('kept' in (await conn.hgetall('ttl:drains')), 'refreshed by the gateway that has it');
      assert.equal(a.get('kept'), true);
    } finally {
      conn.disconnect();
    }
  });

  it('an entry refreshed after a gateway read it stale is not deleted by that gateway (no undrain by a race)', async () => {
    const conn = withExpireDrain(new Redis(redis.url));
    try {
      const stale = `${Date.now() - 3_600_000}`;
      await conn.hset('race:drains', 'r1', stale);
      // Another gateway, one that has r1, rewrites its time between this gateway's read and delete.
      await conn.hset('race:drains', 'r1', `${Date.now()}`);
      assert.equal(await expireDrainEntry(conn, 'race:drains', 'r1', stale), false);
      assert.ok('r1' in (await conn.hgetall('race:drains')), 'the refreshed entry stays: every gateway keeps r1 drained');
      const fresh = await conn.hget('race:drains', 'r1');
      assert.equal(await expireDrainEntry(conn, 'race:drains', 'r1', fresh!), true);
      assert.ok(!('r1' in (await conn.hgetall('race:drains'))), 'unchanged since the read: deleted');
    } finally {
      conn.disconnect();
    }
  });
});
