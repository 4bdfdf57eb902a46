// LoRA adapters on real vLLM replicas: placement by slots, a session kept on one version, on-demand
// load and unload, an unknown model's 404 and a failed load's error. Runs only against a fleet
// started with LoRA (`npm run fleet:vllm -- --lora 4`: 4 adapters, --max-loras 2, lora-0 and
// lora-1 given to every replica at start); skipped otherwise, so that `npm run test:real` never
// restarts a running fleet for it. The on-demand case loads and unloads adapters on that fleet.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { readState, type FleetState } from '../../bench/real/fleet-vllm.js';
import { healthy } from '../../bench/real/vllm-replica.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';
import { RUN, longText, postJson, replicaOf } from './real-fleet.js';

const state = readState();
// The cases count on that fleet's shape (4 adapters, 2 slots, lora-0 and lora-1 preloaded): one
// started for another benchmark (bench:adapters --real preloads 4 of 12) leaves other adapters
// loaded, and the cases would fail for the fleet, not for the gateway.
const shaped = state?.lora !== undefined && Object.keys(state.lora.adapters).length === 4 && state.lora.maxLoras === 2
  && state.lora.preloaded.join(',') === 'lora-0,lora-1';
const up = shaped && (await Promise.all(state!.replicas.map((r) => healthy(r.url)))).every(Boolean);
const skip = up ? false : `needs a running LoRA fleet of its shape: npm run fleet:vllm -- --lora 4${state?.lora !== undefined && !shaped ? ' (the running one was started with other LoRA settings)' : ''}`;

const view = async (g: TestGateway) => ((await (await request(`${g.adminUrl}/admin/replicas`)).body.json()) as any).replicas as any[];
const metric = async (g: TestGateway, series: string) => {
  const text = await (await request(`${g.adminUrl}/metrics`)).body.text();
  return Number(new RegExp(`^${series.replace(/[{}"]/g, (c) => `\\${c}`)} (\\S+)$`, 'm').exec(text)?.[1] ?? 0);
};
const chat = (g: TestGateway, model: string, session: string, extra: Record<string, unknown> = {}) => postJson(`${g.url}/v1/chat/completions`, {
  model, max_tokens: 8, temperature: 0, messages: [{ role: 'system', content: longText(`${RUN}-${model}`, 200) }, { role: 'user', content: `hello from ${session}` }], ...extra,
}, { 'x-session-id': `${RUN}-${session}` });

describe('real vLLM with LoRA adapters', { skip }, () => {
  let f: FleetState;
  let g: TestGateway;
  before(async () => {
    f = state!;
    const lora = f.lora!;
    // Back to the fleet's start: an earlier run's on-demand case loaded one adapter and unloaded
    // a preloaded one to make room, and the cases count on every replica holding exactly the
    // preloaded ones. vLLM's own routes, straight to each replica; an answer of 4xx (already
    // loaded, or not loaded) is the state wanted.
    const post = async (url: string, body: unknown) => (await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })).arrayBuffer();
    for (const r of f.replicas) {
      for (const name of Object.keys(lora.adapters)) {
        if (lora.preloaded.includes(name)) await post(`${r.url}/v1/load_lora_adapter`, { lora_name: name, lora_path: lora.adapters[name] });
        else await post(`${r.url}/v1/unload_lora_adapter`, { lora_name: name });
      }
    }
    g = await startGateway([], {
      upstreams: f.replicas.map((r) => ({ name: r.name, url: r.url })),
      health: { statsIntervalMs: 200 },
      adapters: {
        sources: { ...lora.adapters, broken: '/nonexistent/warmroute-adapter' },
        maxLoadedPerReplica: lora.preloaded.length,
        versions: { tenant: { [lora.preloaded[0]]: 50, [lora.preloaded[1] ?? lora.preloaded[0]]: 50 } },
      },
    });
    // vLLM sets vllm:lora_requests_info only once a LoRA request has run (before that the gauge
    // has no sample): one adapter request to each replica first.
    for (const r of f.replicas) {
      const res = await fetch(`${r.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: lora.preloaded[0], prompt: 'hello', max_tokens: 1 }) });
      await res.arrayBuffer();
    }
    await waitFor('slots scraped', async () => (await view(g)).every((r) => r.lora !== null && r.lora.maxLoras === lora.maxLoras), 30_000);
  });
  after(async () => { await g?.close(); });

  it('a new session of an adapter goes where that adapter is running', async () => {
    const [a, b] = f.lora!.preloaded;
    // One long generation of each adapter (long enough to be running at some scrape of every 200 ms
    // however fast the tiny model decodes): each runs on a replica of its own.
    const open = [a, b].map((model) => request(`${g.url}/v1/chat/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json', 'x-session-id': `${RUN}-long-${model}` },
      body: JSON.stringify({ model, stream: true, max_tokens: 2000, ignore_eos: true, messages: [{ role: 'user', content: `talk, ${model}` }] }),
    }));
    const streams = await Promise.all(open);
    // A stream refused or ended at once would leave nothing running to be seen: say so, not a timeout.
    for (const s of streams) assert.equal(s.statusCode, 200, `long generation answered ${s.statusCode}`);
    const home = replicaOf(f, streams[0].headers as any);
    let seen: unknown = null;
    await waitFor(`${a} seen running`, async () => {
      const v = await view(g);
      seen = v.map((r) => [r.name, r.lora]);
      return v.some((r) => r.name === home && r.lora.running.includes(a));
    }, 30_000).catch((e: Error) => { throw new Error(`${e.message}; ${home} home; last view ${JSON.stringify(seen)}`); });
    const next = await chat(g, a, 'slot-follower');
    assert.equal(next.status, 200, next.text);
    assert.equal(replicaOf(f, next.headers), home, 'placed where its adapter runs');
    // Closing the long generations mid-stream is the point; undici reports that as an abort.
    for (const s of streams) s.body.on('error', () => {}).destroy();
  });

  it('a session keeps the version it was given for every turn', async () => {
    let version: string | undefined;
    for (let turn = 0; turn < 3; turn++) {
      const res = await chat(g, 'tenant', 'versioned', { messages: [{ role: 'user', content: `turn ${turn}` }] });
      assert.equal(res.status, 200, res.text);
      const v = String(res.headers['x-warmroute-adapter-version']);
      version ??= v;
      assert.equal(v, version);
      assert.equal(res.body.model, version, 'vLLM answered as the version');
    }
  });

  it('an adapter no replica has is loaded on demand, one idle adapter unloaded to stay within the bound', async (t) => {
    const extra = Object.keys(f.lora!.adapters).filter((n) => !f.lora!.preloaded.includes(n));
    if (extra.length === 0) return t.skip('every adapter is preloaded: start the fleet with more --lora than --lora-preload');
    const before = await metric(g, 'warmroute_adapter_loads_total{outcome="loaded"}');
    const t0 = performance.now();
    const first = await chat(g, extra[0], 'on-demand');
    const firstMs = performance.now() - t0;
    assert.equal(first.status, 200, first.text);
    assert.equal(await metric(g, 'warmroute_adapter_loads_total{outcome="loaded"}'), before + 1);
    assert.ok(await metric(g, 'warmroute_adapter_unloads_total{outcome="unloaded"}') >= 1, 'the bound made room');
    const at = (await view(g)).find((r) => r.name === replicaOf(f, first.headers))!;
    assert.ok(extra[0] in at.adapters, 'the replica lists it');
    assert.ok(Object.keys(at.adapters).length <= f.lora!.preloaded.length);
    console.log(`first request of ${extra[0]} with its load: ${firstMs.toFixed(0)} ms`);
  });

  it('an adapter unloaded on its replica behind the gateway’s back is loaded there again and the request answered', async (t) => {
    const extra = Object.keys(f.lora!.adapters).filter((n) => !f.lora!.preloaded.includes(n));
    if (extra.length === 0) return t.skip('every adapter is preloaded');
    const first = await chat(g, extra[0], 'regained');
    assert.equal(first.status, 200, first.text);
    const name = replicaOf(f, first.headers);
    const url = f.replicas.find((r) => r.name === name)!.url;
    // What another gateway's unload does: vLLM's own route, straight to the replica.
    const gone = await fetch(`${url}/v1/unload_lora_adapter`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ lora_name: extra[0] }) });
    assert.equal(gone.status, 200, await gone.text());
    const series = `warmroute_upstream_retries_total{replica="${name}",cause="adapter_gone"}`;
    const before = await metric(g, series);
    const next = await chat(g, extra[0], 'regained');
    assert.equal(next.status, 200, next.text);
    assert.equal(replicaOf(f, next.headers), name);
    assert.equal(await metric(g, series), before + 1, 'vLLM’s 404 for the adapter was met, and the adapter loaded again');
  });

  it('a model neither served nor configured is a 404 naming it', async () => {
    const res = await chat(g, `no-such-adapter-${RUN}`, 'unknown');
    assert.equal(res.status, 404);
    assert.equal(res.body.error.code, 'model_not_found');
  });

  it('an adapter vLLM cannot load is a 502 with vLLM’s reason, and nothing is registered', async () => {
    const res = await chat(g, 'broken', 'broken');
    assert.equal(res.status, 502, res.text);
    assert.equal(res.body.error.code, 'adapter_load_failed');
    assert.match(res.body.error.message, /could not load adapter `broken`: answered 4\d\d/);
    for (const r of await view(g)) assert.equal(r.adapters.broken, undefined, r.name);
  });
});
