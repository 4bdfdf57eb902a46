import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import { request } from 'undici';
import { resolveConfig } from '../../src/config/load.js';
import { buildGateway, type Gateway } from '../../src/server.js';
import type { SessionStore } from '../../src/store/types.js';
import { startFixture, type FixtureUpstream } from '../helpers/fixture-upstream.js';
import { chatBody } from '../helpers/gateway.js';
import { startRedis, waitFor, type RedisChild } from './redis-server.js';

interface Running { gw: Gateway; url: string; store: SessionStore | null }

async function turn(g: Running, session: string): Promise<{ replica: string; route: string }> {
  const res = await request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-session-id': session }, body: chatBody() });
  await res.body.text();
  assert.equal(res.statusCode, 200);
  return { replica: String(res.headers['x-warmroute-replica']), route: String(res.headers['x-warmroute-route']) };
}

describe('two gateways sharing pins through Redis', () => {
  let redis: RedisChild;
  let ups: FixtureUpstream[] = [];
  const gateways: Running[] = [];

  // A gateway in front of the two fixtures; `shared` configures Redis (redis.url), else the default memory store.
  async function start(shared: boolean): Promise<Running> {
    const config = resolveConfig({
      upstreams: ups.map((u) => ({ url: u.url, name: u.name })),
      listen: { host: '127.0.0.1', port: 0 },
      admin: { host: '127.0.0.1', port: 0 },
      routing: { strategy: 'affinity' },
      health: { probeIntervalMs: 200 },
      outlier: { baseEjectionMs: 300 },
      ...(shared ? { redis: { url: redis.url, keyPrefix: 'e2e:' } } : {}),
    });
    const gw = buildGateway(config, { log: pino({ level: 'silent' }), defaultMetrics: false });
    const g: Running = { gw, url: '', store: shared ? gw.store : null };
    gateways.push(g);
    g.url = (await gw.listen()).url;
    return g;
  }

  before(async () => {
    redis = await startRedis();
    ups = await Promise.all(['x', 'y'].map((n) => startFixture(n)));
  });
  after(async () => {
    await Promise.allSettled(gateways.map((g) => g.gw.close()));
    await Promise.allSettled(ups.map((u) => u.close()));
    await redis.kill();
  });

  it('routes a session that failed over on gateway A to the same replica from gateway B', async () => {
    const a = await start(true);
    const b = await start(true);
    const alone = await start(false); // what B would do without the shared store

    const first = await turn(a, 'voice-1');
    assert.equal(first.route, 'placed');
    const home = first.replica;
    // A alone loses the session's replica (B still sees it up): A fails the session over.
    a.gw.registry.byName(home)!.draining = true;
    const moved = await turn(a, 'voice-1');
    a.gw.registry.byName(home)!.draining = false;
    assert.equal(moved.route, 'failover');
    assert.notEqual(moved.replica, home);

    await waitFor('B to hear of the move', () => b.store!.get('voice-1', Date.now())?.replica === moved.replica, 1_000);
    const onB = await turn(b, 'voice-1');
    assert.deepEqual(onB, { replica: moved.replica, route: 'pinned' }, 'B follows the failover A made');
    // Without the shared pin a gateway places the session by rendezvous: back on its old replica.
    assert.deepEqual(await turn(alone, 'voice-1'), { replica: home, route: 'placed' });

    // The next turn back on A stays where B served it: one replica for the session, on both.
    assert.deepEqual(await turn(a, 'voice-1'), { replica: moved.replica, route: 'pinned' });
  });

  it('reports each of its two Redis stores (pins, stored responses) as its own warmroute_store_up series', async () => {
    const g = await start(true);
    const up = async () => new Map((await g.gw.metrics.storeUp.get()).values.map((v) => [v.labels.store, v.value]));
    await waitFor('both stores up', async () => (await up()).get('sessions') === 1 && (await up()).get('responses') === 1, 3_000);
    await g.gw.responseStore.close();
    // The connection reports its close after close() has returned: give it time to, so a store that
    // took its own close for an outage would show it here.
    await new Promise((r) => setTimeout(r, 200));
    assert.deepEqual(Object.fromEntries(await up()), { sessions: 1, responses: 1 }, 'closing one on purpose is not an outage of either');
  });
});
