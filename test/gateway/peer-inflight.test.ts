import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { request } from 'undici';
import { DEFAULT_MODEL, startReplica, type SimReplica } from '../../bench/sim/index.js';
import { FAST } from '../sim/helpers.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';
import { startRedis, type RedisChild } from '../store/redis-server.js';

const replicasView = async (g: TestGateway) => ((await (await request(`${g.adminUrl}/admin/replicas`)).body.json()) as any).replicas as any[];

describe('gateways on one Redis count each other’s open requests', () => {
  let redis: RedisChild;
  let r1: SimReplica;
  let r2: SimReplica;
  const gateways: TestGateway[] = [];
  before(async () => {
    redis = await startRedis();
    // Answers as long as max_tokens allows: a stream stays open while the test holds it.
    const long = { ...FAST, outputTokens: { min: 100_000, max: 100_000 } };
    r1 = await startReplica({ ...long, name: 'r1' });
    r2 = await startReplica({ ...long, name: 'r2' });
  });
  after(async () => {
    for (const g of gateways) await g.close();
    await r1.close();
    await r2.close();
    await redis.kill();
  });

  it('streams open through one gateway weigh on its replica in the other’s load bounds, and stop weighing when they end', async () => {
    // Scrapes far apart: what the replicas report cannot tell the second gateway of the first's streams.
    const config = { upstreams: [{ name: 'r1', url: r1.url }, { name: 'r2', url: r2.url }], health: { statsIntervalMs: 60_000 }, redis: { url: redis.url } };
    const a = await startGateway([], config);
    const b = await startGateway([], config);
    gateways.push(a, b);
    // Four streams of one session through the first gateway: all on its pinned replica.
    const open: { res: Awaited<ReturnType<typeof request>>; replica: unknown }[] = [];
    for (let i = 0; i < 4; i++) {
      const res = await request(`${a.url}/v1/chat/completions`, {
        method: 'POST', headers: { 'content-type': 'application/json', 'x-session-id': 'held' },
        body: JSON.stringify({ model: DEFAULT_MODEL, stream: true, max_tokens: 5000, messages: [{ role: 'user', content: 'a long answer' }] }),
      });
      await res.body[Symbol.asyncIterator]().next();
      open.push({ res, replica: res.headers['x-warmroute-replica'] });
    }
    const held = new Map<string, number>();
    for (const o of open) held.set(String(o.replica), (held.get(String(o.replica)) ?? 0) + 1);
    await waitFor('b hears a’s open requests', async () => (await replicasView(b)).every((r) => r.peerInflight === (held.get(r.name) ?? 0)), 3_000);
    // The busier replica by a's streams gets none of b's new sessions while the other has room.
    assert.equal(held.size, 1);
    const busy = [...held.keys()][0];
    const quiet = busy === 'r1' ? 'r2' : 'r1';
    for (let i = 0; i < 6; i++) {
      const res = await request(`${b.url}/v1/chat/completions`, {
        method: 'POST', headers: { 'content-type': 'application/json', 'x-session-id': `new-${i}` },
        body: JSON.stringify({ model: DEFAULT_MODEL, max_tokens: 2, messages: [{ role: 'user', content: `hello ${i}` }] }),
      });
      await res.body.text();
      assert.equal(res.headers['x-warmroute-replica'], quiet, `session new-${i}`);
    }
    for (const o of open) await o.res.body.destroy();
    await waitFor('b hears that they ended', async () => (await replicasView(b)).every((r) => r.peerInflight === 0), 3_000);
  });
});
