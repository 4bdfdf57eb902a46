import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { request } from 'undici';
import { startReplica, type SimReplica } from '../../bench/sim/index.js';
import { FAST } from '../sim/helpers.js';
import { chatModel, startGateway, type TestGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';

const BASE = 'base-m';

const chat = chatModel;

describe('a fleet of adapters: what the gateway lists and refuses', () => {
  let r1: SimReplica;
  let r2: SimReplica;
  let g: TestGateway;
  before(async () => {
    r1 = await startReplica({ ...FAST, name: 'r1', model: BASE, maxLoras: 1, loraModules: { a: '/ad/a', b: '/ad/b' } });
    r2 = await startReplica({ ...FAST, name: 'r2', model: BASE, maxLoras: 2, loraModules: { b: '/ad/b', c: '/ad/c' } });
    g = await startGateway([], { upstreams: [{ name: 'r1', url: r1.url }, { name: 'r2', url: r2.url }], health: { statsIntervalMs: 50 } });
  });
  after(async () => {
    await g.close();
    await r1.close();
    await r2.close();
  });

  it('GET /v1/models lists the base model and each adapter once, with its parent', async () => {
    const res = await request(`${g.url}/v1/models`);
    const body = (await res.body.json()) as { data: { id: string; parent: string | null }[] };
    const ids = body.data.map((m) => m.id).sort();
    assert.deepEqual(ids, ['a', 'b', 'base-m', 'c']);
    for (const m of body.data) assert.equal(m.parent, m.id === BASE ? null : BASE, m.id);
  });

  it('a model no replica serves is a 404 naming it, and no replica sees the request', async () => {
    const before1 = r1.counters();
    const before2 = r2.counters();
    const res = await chat(g, 'no-such-adapter');
    assert.equal(res.status, 404);
    assert.equal(res.json.error.code, 'model_not_found');
    assert.equal(res.json.error.param, 'model');
    assert.match(res.json.error.message, /no-such-adapter/);
    for (const [r, was] of [[r1, before1], [r2, before2]] as const) {
      assert.equal(r.counters().requests, was.requests, r.name);
      assert.equal(r.counters().rejected, was.rejected, r.name);
    }
  });

  it('an adapter goes only to the replicas that serve it', async () => {
    for (let i = 0; i < 4; i++) {
      assert.equal((await chat(g, 'a', { user: `u${i}` })).replica, 'r1');
      assert.equal((await chat(g, 'c', { user: `v${i}` })).replica, 'r2');
    }
  });

  it('adapter requests are counted per adapter (the busiest N, the rest as other) and their first tokens by the slot routing expected', async () => {
    const text = async () => (await request(`${g.adminUrl}/metrics`)).body.text();
    const value = (t: string, series: string) => Number(new RegExp(`^${series.replace(/[{}"]/g, (c) => `\\${c}`)} (\\S+)$`, 'm').exec(t)?.[1] ?? 0);
    const was = await text();
    const wasSlots = ['running', 'free', 'wait'].reduce((n, slot) => n + value(was, `warmroute_adapter_slot_ttft_seconds_count{slot="${slot}"}`), 0);
    const wasAll = ['a', 'b', 'c', 'other'].reduce((n, a) => n + value(was, `warmroute_adapter_requests_total{adapter="${a}"}`), 0);
    // Streamed: a first token is measured.
    for (let i = 0; i < 3; i++) {
      const res = await request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'a', stream: true, max_tokens: 2, user: `m${i}`, messages: [{ role: 'user', content: 'hello' }] }) });
      assert.equal(res.statusCode, 200);
      await res.body.text();
    }
    assert.equal((await chat(g, BASE)).status, 200);
    const slotCount = (t: string) => ['running', 'free', 'wait'].reduce((n, slot) => n + value(t, `warmroute_adapter_slot_ttft_seconds_count{slot="${slot}"}`), 0);
    let now = '';
    // Recorded a moment after the response ended.
    await waitFor('the exchanges recorded', async () => slotCount((now = await text())) - wasSlots >= 3);
    const all = ['a', 'b', 'c', 'other'].reduce((n, a) => n + value(now, `warmroute_adapter_requests_total{adapter="${a}"}`), 0);
    assert.equal(all - wasAll, 3, 'the base model’s request is not an adapter’s');
    const dump = now.split('\n').filter((l) => l.includes('adapter') && !l.includes('bucket')).join('\n');
    assert.ok(value(now, 'warmroute_adapter_requests_total{adapter="a"}') >= 3, dump);
    assert.ok(value(now, 'warmroute_adapter_ttft_seconds_count{adapter="a"}') >= 3, dump);
    const slots = ['running', 'free', 'wait'].reduce((n, slot) => n + value(now, `warmroute_adapter_slot_ttft_seconds_count{slot="${slot}"}`), 0);
    assert.equal(slots - wasSlots, 3, 'each adapter request’s first token is measured under one slot label');
  });

  it('the admin view shows each replica’s adapters and LoRA slots', async () => {
    const view = async () => ((await (await request(`${g.adminUrl}/admin/replicas`)).body.json()) as any).replicas as any[];
    await waitFor('slots scraped', async () => (await view()).every((r) => r.lora !== null), 5_000);
    const [a, b] = (await view()).sort((x, y) => x.name.localeCompare(y.name));
    assert.deepEqual(a.adapters, { a: BASE, b: BASE });
    assert.equal(a.lora.maxLoras, 1);
    assert.equal(b.lora.maxLoras, 2);
    assert.equal(b.lora.free, 2);
  });
});
