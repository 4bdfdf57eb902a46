import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { request } from 'undici';
import { SpanKind } from '@opentelemetry/api';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace';
import { waitFor } from '../helpers/wait.js';
import { startReplica, type SimReplica } from '../../bench/sim/index.js';
import { resolveConfig } from '../../src/config/load.js';
import { FAST } from '../sim/helpers.js';
import { accessLines, startGateway, type TestGateway } from '../helpers/gateway.js';

const BASE = 'base-m';
const ADAPTERS = { 'agent-v3': '/ad/v3', 'agent-v4': '/ad/v4' };

async function chat(g: TestGateway, body: Record<string, unknown>, headers: Record<string, string> = {}) {
  const res = await request(`${g.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: 'agent', max_tokens: 2, messages: [{ role: 'user', content: 'hello' }], ...body }),
  });
  const json = (await res.body.json()) as any;
  return { status: res.statusCode, version: res.headers['x-warmroute-adapter-version'] as string | undefined, model: json.model as string, json };
}

const turn = (g: TestGateway, session: string, n: number) => chat(g, { messages: Array.from({ length: n }, (_, i) => ({ role: 'user', content: `turn ${i} of ${session}` })) }, { 'x-session-id': session });

describe('a client model name rolled out over adapter versions', () => {
  let r1: SimReplica;
  let r2: SimReplica;
  let g: TestGateway;
  const raw = (versions: Record<string, number>) => ({
    upstreams: [{ name: 'r1', url: r1.url }, { name: 'r2', url: r2.url }],
    adapters: { versions: { agent: versions } },
  });
  before(async () => {
    r1 = await startReplica({ ...FAST, name: 'r1', model: BASE, maxLoras: 2, loraModules: ADAPTERS });
    r2 = await startReplica({ ...FAST, name: 'r2', model: BASE, maxLoras: 2, loraModules: ADAPTERS });
    g = await startGateway([], raw({ 'agent-v3': 50, 'agent-v4': 50 }));
  });
  after(async () => {
    await g.close();
    await r1.close();
    await r2.close();
  });

  it('a session gets one version and keeps it for every turn; the replica is sent the version’s name', async () => {
    const seen = new Set<string>();
    for (let s = 0; s < 16; s++) {
      const first = await turn(g, `s${s}`, 1);
      assert.equal(first.status, 200);
      assert.ok(first.version === 'agent-v3' || first.version === 'agent-v4', first.version);
      assert.equal(first.model, first.version, 'the replica answered as the version');
      seen.add(first.version!);
      for (let n = 2; n <= 3; n++) assert.equal((await turn(g, `s${s}`, n)).version, first.version);
    }
    assert.deepEqual([...seen].sort(), ['agent-v3', 'agent-v4'], 'both versions have sessions');
    const lines = accessLines(g.logs).filter((l) => l.requestedModel === 'agent');
    assert.equal(lines.length, 48);
    for (const l of lines) assert.ok(l.model === 'agent-v3' || l.model === 'agent-v4');
  });

  it('requests without a session key are split by weight, a weight of 0 never chosen', async () => {
    const split = new Map<string, number>();
    for (let i = 0; i < 24; i++) {
      const v = (await chat(g, { messages: [{ role: 'user', content: `one-off ${i}` }] })).version!;
      split.set(v, (split.get(v) ?? 0) + 1);
    }
    assert.deepEqual([...split.keys()].sort(), ['agent-v3', 'agent-v4']);
    g.gw.reconfigure(resolveConfig(raw({ 'agent-v3': 0, 'agent-v4': 1 })));
    for (let i = 0; i < 8; i++) assert.equal((await chat(g, { messages: [{ role: 'user', content: `another ${i}` }] })).version, 'agent-v4');
  });

  it('a reload changes the weights for new sessions only', async () => {
    g.gw.reconfigure(resolveConfig(raw({ 'agent-v3': 100, 'agent-v4': 0 })));
    const old = new Map<string, string>();
    for (let s = 0; s < 6; s++) old.set(`keep${s}`, (await turn(g, `keep${s}`, 1)).version!);
    assert.deepEqual(new Set(old.values()), new Set(['agent-v3']));
    g.gw.reconfigure(resolveConfig(raw({ 'agent-v3': 0, 'agent-v4': 100 })));
    for (const [s, v] of old) assert.equal((await turn(g, s, 2)).version, v, 'an ongoing session keeps its version');
    for (let s = 0; s < 6; s++) assert.equal((await turn(g, `new${s}`, 1)).version, 'agent-v4');
  });

  it('GET /v1/models lists the client model name beside the versions', async () => {
    const body = (await (await request(`${g.url}/v1/models`)).body.json()) as { data: { id: string; parent: string | null }[] };
    const agent = body.data.find((m) => m.id === 'agent');
    assert.ok(agent);
    assert.equal(agent.parent, BASE);
    assert.ok(body.data.some((m) => m.id === 'agent-v3'));
  });
});

describe('a session’s version shared by gateways through Redis', () => {
  it('a session placed by one gateway keeps its version on another whose weights would choose differently', async () => {
    const { startRedis } = await import('../store/redis-server.js');
    const redis = await startRedis();
    const r = await startReplica({ ...FAST, name: 'r1', model: BASE, maxLoras: 2, loraModules: ADAPTERS });
    const cfg = (versions: Record<string, number>) => ({ upstreams: [{ name: 'r1', url: r.url }], redis: { url: redis.url }, adapters: { versions: { agent: versions } } });
    const g1 = await startGateway([], cfg({ 'agent-v3': 1, 'agent-v4': 0 }));
    const g2 = await startGateway([], cfg({ 'agent-v3': 0, 'agent-v4': 1 }));
    try {
      for (let s = 0; s < 4; s++) {
        assert.equal((await turn(g1, `shared${s}`, 1)).version, 'agent-v3');
        // The other gateway hears of it by pub/sub, or reads it from the store on its first request of the session.
        assert.equal((await turn(g2, `shared${s}`, 2)).version, 'agent-v3');
      }
      // A session new to both gets g2's own choice there.
      assert.equal((await turn(g2, 'fresh', 1)).version, 'agent-v4');
    } finally {
      await g1.close();
      await g2.close();
      await r.close();
      await redis.kill();
    }
  });
});

describe('adapters in the trace', () => {
  it('the version chosen and the load waited for are on the request’s SERVER span', async () => {
    const { mkdtempSync, rmSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const dir = mkdtempSync(join(tmpdir(), 'warmroute-trace-adapters-'));
    const r = await startReplica({ ...FAST, name: 'r1', model: BASE, maxLoras: 2, runtimeLoraUpdating: true, loraLoadMs: 20 });
    const mem = new InMemorySpanExporter();
    const g = await startGateway([], {
      upstreams: [{ name: 'r1', url: r.url }], health: { statsIntervalMs: 50 },
      adapters: { sources: { 'agent-v5': dir }, versions: { agent: { 'agent-v5': 1 } } },
      tracing: { tracesEndpoint: 'http://127.0.0.1:9/v1/traces', batch: { scheduledDelayMs: 5 } },
    }, { env: {}, traceExporter: mem });
    try {
      await waitFor('slots scraped', async () => ((await (await request(`${g.adminUrl}/admin/replicas`)).body.json()) as any).replicas[0].lora !== null, 5_000);
      const res = await turn(g, 'traced', 1);
      assert.equal(res.status, 200, JSON.stringify(res.json));
      assert.equal(res.version, 'agent-v5');
      await waitFor('the SERVER span', () => mem.getFinishedSpans().some((s) => s.kind === SpanKind.SERVER && s.attributes['warmroute.adapter.version'] !== undefined), 10_000);
      const span = mem.getFinishedSpans().find((s) => s.kind === SpanKind.SERVER && s.attributes['warmroute.adapter.version'] !== undefined)!;
      assert.equal(span.attributes['warmroute.adapter.version'], 'agent-v5');
      assert.equal(span.attributes['gen_ai.request.model'], 'agent');
      const load = span.events.find((e) => e.name === 'warmroute.adapter.load');
      assert.ok(load, 'the load it waited for is an event');
      assert.equal(load.attributes?.['warmroute.adapter'], 'agent-v5');
      assert.equal(load.attributes?.['warmroute.adapter.outcome'], 'loaded');
    } finally {
      await g.close();
      await r.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
