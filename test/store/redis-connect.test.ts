import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Cluster, Redis } from 'ioredis';
import { redisTarget } from '../../src/store/redis-connect.js';

/** The options a target's connection is made with (lazy: nothing is dialled). */
function optionsOf(url: string): { username?: string; password?: string } {
  const c = redisTarget(url).connect({ lazyConnect: true });
  try {
    const o = 'redisOptions' in c.options ? (c as Cluster).options.redisOptions! : (c as Redis).options;
    return { username: o.username ?? undefined, password: o.password ?? undefined };
  } finally {
    c.disconnect();
  }
}

describe('redis URLs of Sentinel and Cluster deployments', () => {
  it('carry an ACL user and a password, or a password alone, percent-decoded', () => {
    assert.deepEqual(optionsOf('redis-sentinel://warm%40route:s%3Acret@10.0.0.1:26379,10.0.0.2:26379/primary'), { username: 'warm@route', password: 's:cret' });
    assert.deepEqual(optionsOf('redis-cluster://warmroute:pw@10.0.0.1:7000'), { username: 'warmroute', password: 'pw' });
    assert.deepEqual(optionsOf('redis-cluster://:pw@10.0.0.1:7000'), { username: undefined, password: 'pw' });
    assert.deepEqual(optionsOf('redis-sentinel://pw@10.0.0.1:26379'), { username: undefined, password: 'pw' });
    assert.deepEqual(optionsOf('redis-cluster://10.0.0.1:7000'), { username: undefined, password: undefined });
  });
});
