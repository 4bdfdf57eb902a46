/** Issue 17 #13: session tags in logs are keyed by a per-deployment secret, so a guessable key cannot be found from its tag. */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { hash64 } from '../../src/identify/hash.js';
import { startFixture, type FixtureUpstream } from '../helpers/fixture-upstream.js';
import { chatBody, startGateway, waitForAccess, type TestGateway } from '../helpers/gateway.js';

const SECRET = 'deployment-secret-0123456789';

async function tagOf(g: TestGateway, session: string): Promise<string> {
  const res = await request(`${g.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-session-id': session },
    body: chatBody({ stream: false }),
  });
  await res.body.text();
  assert.equal(res.statusCode, 200);
  const lines = await waitForAccess(g, (ls) => ls.some((l) => l.sessionSource !== undefined && l.session !== undefined && l.__seen !== true));
  const line = lines.filter((l) => l.session !== undefined && l.__seen !== true).at(-1)!;
  for (const l of lines) l.__seen = true;
  assert.match(line.session, /^[0-9a-f]{12}$/);
  return line.session;
}

describe('session tags in logs, no secret configured (issue 17 #13)', () => {
  let a: FixtureUpstream;
  let g: TestGateway;
  before(async () => {
    a = await startFixture('a');
    g = await startGateway([a.url]);
  });
  after(async () => { await g.close(); await a.close(); });

  it('cannot be matched offline against guessed keys: the tag is not an unkeyed hash of the key', async () => {
    // A guessable key (a room name): whoever reads the logs hashes every candidate.
    const key = 'room-1234';
    const candidates = Array.from({ length: 10_000 }, (_, i) => `room-${i}`);
    const unkeyed = new Set(candidates.map((c) => hash64(c).toString(16).padStart(16, '0').slice(0, 12)));
    const tag = await tagOf(g, key);
    assert.ok(!unkeyed.has(tag), `tag ${tag} is found by hashing guesses without the secret`);
  });
});

describe('session tags in logs (issue 17 #13)', () => {
  let a: FixtureUpstream;
  let same1: TestGateway;
  let same2: TestGateway;
  let other: TestGateway;
  let unset: TestGateway;
  before(async () => {
    a = await startFixture('a');
    same1 = await startGateway([a.url], { logging: { sessionTagSecret: SECRET } });
    same2 = await startGateway([a.url], { logging: { sessionTagSecret: SECRET } });
    other = await startGateway([a.url], { logging: { sessionTagSecret: 'another-deployment-secret' } });
    unset = await startGateway([a.url]);
  });
  after(async () => {
    await Promise.all([same1, same2, other, unset].map((g) => g.close()));
    await a.close();
  });

  it('correlates across the gateways of one deployment (same secret) and only there', async () => {
    const key = 'call-CA0123456789';
    const t1 = await tagOf(same1, key);
    assert.equal(await tagOf(same1, key), t1, 'stable within a gateway');
    assert.equal(await tagOf(same2, key), t1, 'the same on every gateway with the same secret');
    assert.notEqual(await tagOf(other, key), t1, 'another secret, another tag');
    assert.notEqual(await tagOf(same1, 'call-CA0123456780'), t1);
  });

  it('without a configured secret, draws one at start and says so', async () => {
    const key = 'call-unset';
    const t = await tagOf(unset, key);
    assert.equal(await tagOf(unset, key), t);
    const unkeyed = hash64(key).toString(16).padStart(16, '0').slice(0, 12);
    assert.notEqual(t, unkeyed);
    assert.notEqual(t, await tagOf(same1, key));
    // One gateway, no Redis: its own secret breaks nothing, so a clean start warns about nothing.
    assert.ok(!unset.logs.some((l) => l.setting === 'logging.sessionTagSecret'), 'no warning without shared sessions');
  });

  it('warns about a drawn secret only where gateways share sessions through Redis', async () => {
    const { startRedis } = await import('../store/redis-server.js');
    const redis = await startRedis();
    const shared = await startGateway([a.url], { redis: { url: redis.url } });
    try {
      assert.ok(shared.logs.some((l) => l.level === 40 && l.setting === 'logging.sessionTagSecret' && /Redis/.test(l.msg)), 'a warning names the setting');
    } finally {
      await shared.close();
      await redis.kill();
    }
  });

  it('takes the secret from WARMROUTE_SESSION_TAG_SECRET', async () => {
    const { loadConfig } = await import('../../src/config/load.js');
    const config = loadConfig({}, { WARMROUTE_SESSION_TAG_SECRET: SECRET, WARMROUTE_UPSTREAM: a.url });
    assert.equal(config.logging.sessionTagSecret, SECRET);
  });
});
