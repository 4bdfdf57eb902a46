import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startFleet, type SimFleet } from '../../bench/sim/index.js';
import type { Gateway } from '../../src/server.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { FAST } from '../sim/helpers.js';
import { counterSum, startRedis, waitFor, type RedisChild } from './redis-server.js';

const MODEL = 'google/gemma-4-31B-it';

describe('stored-response records shared between gateways through Redis', () => {
  let redis: RedisChild;
  let fleet: SimFleet;
  const gateways: TestGateway[] = [];

  async function start(shared: boolean): Promise<{ gw: Gateway; client: OpenAI }> {
    const g = await startGateway(fleet.urls, shared ? { redis: { url: redis.url, keyPrefix: 'resp-e2e:' } } : {});
    gateways.push(g);
    return { gw: g.gw, client: new OpenAI({ baseURL: `${g.url}/v1`, apiKey: 'x', maxRetries: 0 }) };
  }

  before(async () => {
    redis = await startRedis();
    fleet = await startFleet({ replicas: 4, ...FAST });
  });
  after(async () => {
    await Promise.allSettled(gateways.map((g) => g.close()));
    await fleet.close();
    await redis.kill();
  });

  it('a conversation started on gateway A continues on gateway B, on the replica that stores it', async () => {
    const a = await start(true);
    const b = await start(true);
    const alone = await start(false);
    const { data: first, response } = await a.client.responses.create({ model: MODEL, input: 'Hello from A', store: true }).withResponse();
    const home = response.headers.get('x-warmroute-replica')!;
    // Recorded under its own prefix, next to (not in) the session pins.
    assert.equal((await redis.client().get(`resp-e2e:resp:sess:${first.id}`))?.split('|')[0], home);
    await waitFor('B to hear of the record', () => b.gw.responseStore.get(first.id, Date.now())?.replica === home, 1_000);

    // Turns alternate between the gateways, as a Service spreading one agent's requests would.
    let prev = first.id;
    for (let t = 1; t <= 4; t++) {
      const via = t % 2 === 1 ? b : a;
      const { data, response: res } = await via.client.responses.create({ model: MODEL, input: `turn ${t}`, previous_response_id: prev, store: true }).withResponse();
      assert.deepEqual([res.headers.get('x-warmroute-replica'), res.headers.get('x-warmroute-route')], [home, 'pinned'], `turn ${t}`);
      prev = data.id;
      const other = via === a ? b : a;
      await waitFor('the other gateway to hear of it', () => other.gw.responseStore.get(prev, Date.now()) !== null, 1_000);
    }
    // A gateway without the shared records has never seen the id: routed as usual, counted as unknown.
    await alone.client.responses.create({ model: MODEL, input: 'and?', previous_response_id: prev }).catch(() => null);
    assert.equal(await counterSum(alone.gw.metrics.stateLost, ['reason', 'unknown']), 1);
    assert.equal(await counterSum(b.gw.metrics.stateLost), 0);
  });
});
