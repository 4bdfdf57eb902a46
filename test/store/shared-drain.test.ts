/**
 * Issue 17 #7: with a shared store, a drain through one gateway (one pod behind the admin
 * Service) reaches every gateway within a second: none places new sessions on the replica.
 * Two (then three) gateways, a real redis-server, fixture replicas.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { startFixture, type FixtureUpstream } from '../helpers/fixture-upstream.js';
import { chatBody, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startRedis, waitFor, type RedisChild } from './redis-server.js';

describe('drain state shared through Redis (issue 17 #7)', () => {
  let redis: RedisChild;
  let r1: FixtureUpstream;
  let r2: FixtureUpstream;
  const gateways: TestGateway[] = [];
  const start = async () => {
    const g = await startGateway([r1.url, r2.url], { redis: { url: redis.url, keyPrefix: 'drain:' } });
    gateways.push(g);
    return g;
  };
  const admin = async (g: TestGateway, name: string, verb: 'drain' | 'undrain') => {
    const res = await request(`${g.adminUrl}/admin/replicas/${name}/${verb}`, { method: 'POST' });
    await res.body.text();
    assert.equal(res.statusCode, 202);
  };
  const placedOn = async (g: TestGateway, session: string) => {
    const res = await request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-session-id': session }, body: chatBody({ stream: false }) });
    await res.body.text();
    assert.equal(res.statusCode, 200);
    return String(res.headers['x-warmroute-replica']);
  };
  const drainingOn = (g: TestGateway, name: string) => g.gw.registry.byName(name)?.draining === true;

  before(async () => {
    redis = await startRedis();
    r1 = await startFixture('r1');
    r2 = await startFixture('r2');
  });
  after(async () => {
    await Promise.allSettled(gateways.map((g) => g.close()));
    await r1.close();
    await r2.close();
    await redis.kill();
  });

  it('a drain through gateway A stops gateway B placing there within a second; an undrain through B reaches A', async () => {
    const a = await start();
    const b = await start();
    const name = a.gw.registry.replicas[0].name;
    await admin(a, name, 'drain');
    const took = await waitFor('B to see the drain', () => drainingOn(b, name), 1_000);
    assert.ok(took <= 1_000);
    for (let i = 0; i < 12; i++) assert.notEqual(await placedOn(b, `after-drain-${i}`), name, 'B placed a new session on the draining replica');
    // A gateway that starts later (a rolling deploy) reads the drain at once.
    const c = await start();
    await waitFor('C to see the drain', () => drainingOn(c, name), 1_000);
    await admin(b, name, 'undrain');
    await waitFor('A and C to see the undrain', () => !drainingOn(a, name) && !drainingOn(c, name), 1_000);
    const placed = new Set<string>();
    for (let i = 0; i < 12; i++) placed.add(await placedOn(a, `after-undrain-${i}`));
    assert.ok(placed.has(name), 'A places on it again');
  });
});
