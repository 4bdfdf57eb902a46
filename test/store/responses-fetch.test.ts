/**
 * Issue 17 #3: with Redis, a stored-response follow-up on a gateway that lacks the record locally
 * (started after it was stored: a rolling deploy, a scale-up) reads Redis before routing, waiting
 * a bounded time; only a record in neither place is `unknown`. Two gateways, a real redis-server,
 * simulated vLLM replicas that keep their stored responses in memory.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startFleet, type SimFleet } from '../../bench/sim/index.js';
import type { Gateway } from '../../src/server.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { FAST } from '../sim/helpers.js';
import { counterSum, startRedis, type RedisChild } from './redis-server.js';

const MODEL = 'google/gemma-4-31B-it';

describe('stored-response follow-ups on a gateway without the record (issue 17 #3)', () => {
  let redis: RedisChild;
  let fleet: SimFleet;
  const gateways: TestGateway[] = [];

  async function start(responses: Record<string, unknown> = {}): Promise<{ gw: Gateway; client: OpenAI }> {
    const g = await startGateway(fleet.urls, { redis: { url: redis.url, keyPrefix: 'fetch:' }, responses });
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

  it('a gateway started after the responses were stored sends each follow-up to the replica holding it', async () => {
    const a = await start();
    const started: { id: string; home: string }[] = [];
    for (let i = 0; i < 6; i++) {
      const { data, response } = await a.client.responses.create({ model: MODEL, input: `conversation ${i}`, store: true }).withResponse();
      started.push({ id: data.id, home: response.headers.get('x-warmroute-replica')! });
    }
    // A fresh pod of the rolling deploy: it never heard the records published.
    const b = await start();
    // size() reads the local view only (get() would look the key up in the background).
    assert.equal(b.gw.responseStore.size(), 0, 'no record in its local view');
    for (const { id, home } of started) {
      const { response } = await b.client.responses.create({ model: MODEL, input: 'next turn', previous_response_id: id, store: true }).withResponse();
      assert.deepEqual([response.headers.get('x-warmroute-replica'), response.headers.get('x-warmroute-route')], [home, 'pinned'], id);
    }
    assert.equal(await counterSum(b.gw.metrics.stateLost), 0, 'none lost, none unknown');
    assert.equal(await counterSum(b.gw.metrics.storeEvents, ['event', 'fetched']), started.length);
    // A true miss is still unknown, after asking Redis.
    await b.client.responses.create({ model: MODEL, input: 'x', previous_response_id: 'resp_never_stored_anywhere' }).catch(() => null);
    assert.equal(await counterSum(b.gw.metrics.stateLost, ['reason', 'unknown']), 1);
    assert.equal(await counterSum(b.gw.metrics.storeEvents, ['event', 'fetch_missed']), 1);
  });

  it('the wait is bounded: Redis silent, the follow-up is routed after responses.fetchMs, counted as unconfirmed', async () => {
    const a = await start();
    const data = await a.client.responses.create({ model: MODEL, input: 'before the pause', store: true });
    const b = await start({ fetchMs: 100 });
    const admin = redis.client();
    await admin.client('PAUSE', 3_000, 'ALL');
    const t0 = performance.now();
    try {
      await b.client.responses.create({ model: MODEL, input: 'during the pause', previous_response_id: data.id }).catch(() => null);
      assert.ok(performance.now() - t0 < 2_500, 'answered while Redis was still paused');
    } finally {
      await admin.client('UNPAUSE');
    }
    assert.equal(await counterSum(b.gw.metrics.stateLost, ['reason', 'unconfirmed']), 1);
    assert.ok((await counterSum(b.gw.metrics.storeErrors, ['op', 'fetch'])) >= 1);
  });
});
