import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { startFixture } from '../helpers/fixture-upstream.js';
import { chatBody, startGateway } from '../helpers/gateway.js';

describe('gateway options', () => {
  it('route and Server-Timing headers can be turned off', async () => {
    const a = await startFixture('a');
    const g = await startGateway([a.url], { headers: { route: false, serverTiming: false } });
    try {
      const res = await request(`${g.url}/v1/chat/completions`, { method: 'POST', body: chatBody() });
      await res.body.text();
      assert.equal(res.statusCode, 200);
      for (const h of ['x-warmroute-replica', 'x-warmroute-route', 'server-timing']) assert.equal(res.headers[h], undefined, h);
    } finally {
      await g.close();
      await a.close();
    }
  });

  it('a stream silent for longer than timeouts.idleMs ends with an error event', async () => {
    const a = await startFixture('a');
    // undici checks body timeouts on a ~0.5 s tick: a 300 ms limit fires within about a second.
    const g = await startGateway([a.url], { timeouts: { idleMs: 300 } });
    try {
      const res = await request(`${g.url}/v1/chat/completions`, {
        method: 'POST', headers: { 'x-fixture-chunks': '2', 'x-fixture-gap-ms': '2500' }, body: chatBody(),
      });
      const text = await res.body.text();
      assert.equal(res.statusCode, 200);
      assert.ok(!text.includes('tok1') && !text.includes('[DONE]'));
      const err = JSON.parse(text.split('\n\n').find((e) => e.startsWith('data: {"error"'))!.slice(6)).error;
      assert.equal(err.code, 'upstream_stream_error');
      assert.match(err.message, /no data for 300 ms/);
      const metrics = await (await request(`${g.adminUrl}/metrics`)).body.text();
      assert.match(metrics, /warmroute_stream_errors_total\{replica="127\.0\.0\.1:\d+",cause="idle_timeout"\} 1/);
    } finally {
      await g.close();
      await a.close();
    }
  });

  it('/v1/models lists each model once across replicas, and only from healthy ones', async () => {
    const [a, b] = await Promise.all([startFixture('a'), startFixture('b')]);
    const g = await startGateway([a.url, b.url]);
    try {
      const list = (await (await request(`${g.url}/v1/models`)).body.json()) as { object: string; data: { id: string }[] };
      assert.equal(list.object, 'list');
      assert.deepEqual(list.data.map((m) => m.id), ['fixture-model']);
      await a.close();
      await b.close();
      for (const r of g.gw.registry.replicas) g.gw.health.markDown(r, 'test', 'closed');
      const none = await request(`${g.url}/v1/models`);
      assert.equal(none.statusCode, 503);
      assert.equal(((await none.body.json()) as { error: { code: string } }).error.code, 'no_healthy_replica');
    } finally {
      await g.close();
    }
  });
});
