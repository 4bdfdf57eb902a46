// Operations against real vLLM replicas: the /metrics warmroute reads (and a real restart noticed
// from it), mid-stream resume with continue_final_message, and the KV-events stream.
// Each checked against what the simulator (bench/sim) claims.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startReplica, type SimReplica } from '../../bench/sim/index.js';
import { restartReplica, type FleetState } from '../../bench/real/fleet-vllm.js';
import { VENV_PYTHON } from '../../bench/real/vllm-replica.js';
import { cuttingProxy } from './cutting-proxy.js';
import { parseVllmMetrics } from '../../src/fleet/vllm-stats.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';
import { RUN, contentOf, getText, longText, postJson, realFleet, sseEvents, type SseChunk } from './real-fleet.js';

/** The vllm: series and labels warmroute reads (src/fleet/vllm-stats.ts). */
const READ_SERIES = ['vllm:num_requests_waiting', 'vllm:num_requests_running', 'vllm:kv_cache_usage_perc', 'vllm:prefix_cache_queries_total', 'vllm:cache_config_info'];

const admin = async (g: TestGateway) => JSON.parse((await getText(`${g.adminUrl}/admin/replicas`)).text).replicas as any[];

describe('real vLLM: operations', () => {
  let f: FleetState;
  let g: TestGateway;
  let sim: SimReplica;
  before(async () => {
    f = await realFleet();
    g = await startGateway([], { upstreams: f.replicas.map((r) => ({ url: r.url, name: r.name })), health: { statsIntervalMs: 100, probeIntervalMs: 500 } });
    sim = await startReplica({ model: f.model });
  });
  after(async () => {
    await g?.close();
    await sim?.close();
  });

  it('/metrics: the series warmroute reads exist on vLLM as on the simulator, and parse to the same fields', async () => {
    const real = (await getText(`${f.replicas[0].url}/metrics`)).text;
    const simText = (await getText(`${sim.url}/metrics`)).text;
    for (const name of [...READ_SERIES, 'process_start_time_seconds']) {
      assert.match(real, new RegExp(`^${name}[{ ]`, 'm'), `vLLM exports ${name}`);
      assert.match(simText, new RegExp(`^${name}[{ ]`, 'm'), `the simulator exports ${name}`);
    }
    const a = parseVllmMetrics(real)!;
    const b = parseVllmMetrics(simText)!;
    assert.ok(a && b);
    for (const k of Object.keys(a) as (keyof typeof a)[]) assert.equal(typeof a[k], typeof b[k], `${k}: both ${typeof a[k]}`);
    assert.equal(a.kvCapacityTokens, 47 * 128, 'num_gpu_blocks (48) less the null block, × block_size (128 on CPU)');
    assert.ok(a.startTimeSeconds! > 1.7e9 && a.startTimeSeconds! < Date.now() / 1000);
    // The cache_config_info labels warmroute multiplies are there in both.
    for (const text of [real, simText]) assert.match(text, /^vllm:cache_config_info\{[^}]*block_size="\d+"[^}]*num_gpu_blocks="\d+"/m);
  });

  it('/admin/replicas shows the scraped KV capacity, and waiting/running/KV usage move under load', async () => {
    await waitFor('a scrape of both replicas', async () => (await admin(g)).every((r) => r.kvCapacityTokens === 47 * 128 && r.lastScrapeAt), 10_000);
    const target = f.replicas[0];
    let busiest = { running: 0, waiting: 0, kvUsage: 0 };
    let done = false;
    // Three cold ~2.9K-token prompts at once, straight to the replica (the gateway only watches).
    const load = Promise.all([0, 1, 2].map((i) => postJson(`${target.url}/v1/chat/completions`, { model: f.model, max_tokens: 16, messages: [{ role: 'user', content: longText(`${RUN}-load-${i}`) }] }))).finally(() => { done = true; });
    while (!done) {
      const r = (await admin(g)).find((x) => x.name === target.name);
      busiest = { running: Math.max(busiest.running, r.running), waiting: Math.max(busiest.waiting, r.waiting), kvUsage: Math.max(busiest.kvUsage, r.kvUsage) };
      await new Promise((res) => setTimeout(res, 50));
    }
    for (const res of await load) assert.equal(res.status, 200, res.text);
    assert.ok(busiest.running >= 1, `running seen: ${JSON.stringify(busiest)}`);
    assert.ok(busiest.kvUsage > 0 && busiest.kvUsage <= 1, `KV usage seen: ${JSON.stringify(busiest)}`);
  });

  it('a real restart is noticed from process_start_time_seconds: a response stored before it is reported lost, not sent on', async () => {
    const stored = await postJson(`${g.url}/v1/responses`, { model: f.model, store: true, input: `before restart ${RUN}`, max_output_tokens: 2 });
    assert.equal(stored.status, 200, stored.text);
    const home = f.replicas.findIndex((r) => r.name === stored.headers['x-warmroute-replica']);
    assert.ok(home >= 0);
    const before = parseVllmMetrics((await getText(`${f.replicas[home].url}/metrics`)).text)!.startTimeSeconds!;
    const t0 = Date.now();
    await restartReplica(home);
    const restartMs = Date.now() - t0;
    const afterStart = parseVllmMetrics((await getText(`${f.replicas[home].url}/metrics`)).text)!.startTimeSeconds!;
    assert.ok(afterStart > before, 'a new process start time');
    await waitFor('the gateway to see the replica up again', async () => (await admin(g)).find((r) => r.name === f.replicas[home].name)?.state === 'up', 30_000);
    const follow = await postJson(`${g.url}/v1/responses`, { model: f.model, store: true, input: 'after restart', previous_response_id: stored.body.id, max_output_tokens: 2 });
    assert.equal(follow.status, 409, follow.text);
    assert.equal(follow.body.error.code, 'response_state_lost');
    assert.match(follow.body.error.message, /restarted/);
    const lost = (await getText(`${g.adminUrl}/metrics`)).text.split('\n').filter((l) => l.startsWith('warmroute_state_lost_total'));
    assert.ok(lost.includes('warmroute_state_lost_total{reason="restarted"} 1'), lost.join('; '));
    console.log(`# restart of ${f.replicas[home].name}: healthy again after ${(restartMs / 1000).toFixed(1)} s`);
  });

  it('mid-stream resume on vLLM: a replica cut after a few chunks, the other continues with continue_final_message, one coherent stream', async () => {
    const [cutTo, other] = f.replicas;
    const cutter = await cuttingProxy(new URL(cutTo.url).port);
    const rg = await startGateway([], { upstreams: [{ url: cutter.url, name: 'vllm-cut' }, { url: other.url, name: other.name }], resume: { enabled: true } });
    try {
      let res: Awaited<ReturnType<typeof postJson>> | null = null;
      for (let i = 0; i < 8 && !res; i++) {
        cutter.arm();
        const r = await postJson(`${rg.url}/v1/chat/completions`, { model: f.model, stream: true, stream_options: { include_usage: true }, max_tokens: 48, temperature: 0, messages: [{ role: 'user', content: `resume ${RUN} ${i}` }] }, { 'x-session-id': `resume-${RUN}-${i}` });
        if (cutter.cuts() > 0) res = r;
      }
      assert.ok(res, 'one stream went through the cutting proxy');
      assert.equal(res.status, 200);
      const all = sseEvents(res.text);
      assert.equal(all.at(-1), '[DONE]', 'the stream ends as a complete one');
      const chunks = all.filter((e): e is SseChunk => e !== '[DONE]');
      assert.ok(chunks.every((c) => c.error === undefined), 'no error event');
      assert.equal(new Set(chunks.map((c) => c.id)).size, 1, 'one id for the whole answer');
      assert.equal(chunks.filter((c) => c.choices?.[0]?.delta?.role !== undefined).length, 1, 'one role chunk');
      assert.equal(chunks.filter((c) => c.usage).length, 1, 'one usage chunk');
      assert.ok(contentOf(all).startsWith(cutter.sentText()), 'the answer starts with what the cut replica sent');
      assert.ok(contentOf(all).length > cutter.sentText().length, 'and goes on with what the other replica wrote');
      // Counted when the exchange is finished, a moment after the client has read the stream.
      const resumes = async () => (await getText(`${rg.adminUrl}/metrics`)).text.split('\n').filter((l) => l.startsWith('warmroute_stream_resumes_total'));
      await waitFor('the resume counted', async () => (await resumes()).includes('warmroute_stream_resumes_total{outcome="resumed"} 1'), 5_000)
        .catch(async (e) => { throw new Error(`${e.message}: ${(await resumes()).join('; ')}`); });
    } finally {
      await rg.close();
      await cutter.close();
    }
  });

  it('KV events: a cold prompt publishes BlockStored on the replica\'s topic, and the replay socket answers', async () => {
    const r = f.replicas[1];
    assert.ok(r.kvEvents, 'the fleet publishes KV events');
    const dir = await mkdtemp(join(tmpdir(), 'kv-'));
    const out = join(dir, 'live.jsonl');
    const sub = spawn(VENV_PYTHON, ['bench/real/kv-capture.py', '--endpoint', r.kvEvents.endpoint, '--out', out, '--seconds', '20'], { stdio: 'ignore' });
    try {
      await new Promise((res) => setTimeout(res, 1_500)); // a SUB socket misses what is sent before it joins
      const prompt = longText(`${RUN}-kv`, 300);
      const res = await postJson(`${r.url}/v1/completions`, { model: f.model, prompt, max_tokens: 1 });
      assert.equal(res.status, 200);
      let events: any[] = [];
      await waitFor('a BlockStored message', async () => {
        events = (await readFile(out, 'utf8').catch(() => '')).split('\n').filter(Boolean).map((l) => JSON.parse(l));
        return events.some((e) => e.decoded?.[1]?.some((ev: any) => ev.type === 'BlockStored'));
      }, 15_000);
      const msg = events.find((e) => e.decoded[1].some((ev: any) => ev.type === 'BlockStored'));
      assert.equal(msg.topic, r.kvEvents.topic);
      assert.equal(msg.frames_hex.length, 3, 'topic, sequence, payload');
      assert.equal(msg.frames_hex[1].length, 16, 'an 8-byte sequence');
      const stored = msg.decoded[1].find((ev: any) => ev.type === 'BlockStored');
      assert.equal(stored.block_size, 128);
      assert.equal(stored.token_ids.length, stored.block_hashes.length * 128, 'whole blocks only');
      // Replay from that message's sequence: it comes back, then the end marker.
      const rep = join(dir, 'replay.jsonl');
      await run(VENV_PYTHON, ['bench/real/kv-capture.py', '--endpoint', r.kvEvents.replayEndpoint, '--replay', String(msg.seq), '--out', rep, '--seconds', '10']);
      const replayed = (await readFile(rep, 'utf8')).split('\n').filter(Boolean).map((l) => JSON.parse(l));
      assert.equal(replayed[0].seq, msg.seq);
      assert.equal(replayed[0].frames_hex[2], msg.frames_hex[2], 'the same payload bytes');
      assert.equal(replayed.at(-1).seq, -1, 'ends with the end-of-replay marker');
    } finally {
      sub.kill('SIGTERM');
    }
  });

});

function run(cmd: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    p.stderr.on('data', (d) => { err += d; });
    p.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${cmd} exited ${code}: ${err}`))));
  });
}

