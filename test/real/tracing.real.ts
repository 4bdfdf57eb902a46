// Traces end to end on real components: a Python OpenAI SDK client inside a span of its own →
// warmroute's SERVER span (the first attempt's context is its own) → vLLM's `llm_request`, all in one
// trace in a real Jaeger v2 (built from the Go module proxy by bench/real/install-jaeger.sh), on a
// real vLLM CPU replica (index 8, beside the shared fleet) started with --otlp-traces-endpoint.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from '../../bench/lib/procs.js';
import type { JaegerSpan, JaegerTrace } from '../../src/probe/jaeger.js';
import { jaegerTrace, startJaeger, type Jaeger } from '../../bench/real/jaeger.js';
import { prepare } from '../../bench/real/fleet-vllm.js';
import { SERVED_MODEL, VENV_PYTHON, startReplicaProcess, stopReplicaProcess, waitHealthy, type ReplicaState } from '../../bench/real/vllm-replica.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { formatTable } from '../../src/probe/report.js';
import { runProbe } from '../../src/probe/run.js';
import { RUN, longText, postJson } from './real-fleet.js';

const INDEX = 8;
/**
 * How far the first token's way back may take, in ms: vLLM's time_to_first_token ends when its API
 * process takes the engine's first output (the output processor's iteration time), so what is left
 * of the gateway's TTFT is that output detokenized, framed as SSE, written by uvicorn and read by
 * the gateway on loopback. Nothing in it waits on the engine, only on vLLM's API process getting
 * the CPU beside its engine's, which busy-polls: 2.0, 2.4, 3.8, 9.1 and 15.8 ms measured at load
 * 1–4 on 2 cores. The bound is what such a process can be kept off a shared core for, not the
 * gateway's: the gateway's own part is checked exactly above (the hop events tile its TTFT).
 */
const BACK_MS = Number(process.env.WARMROUTE_TRACE_TOLERANCE_MS ?? 20);
/** Clock slack between the gateway's marks (Node's clock) and vLLM's (Python's time.time()), same host. */
const SLACK_MS = 2;
/** The trace as Jaeger's query API served it: what bench/tracing/render-trace.ts draws docs/trace.png from. */
const TRACE_OUT = process.env.WARMROUTE_TRACE_OUT ?? 'bench/out/trace-real.json';

const tag = (s: JaegerSpan, key: string) => s.tags.find((t) => t.key === key)?.value;
const parentOf = (s: JaegerSpan) => s.references.find((r) => r.refType === 'CHILD_OF')?.spanID ?? null;

describe('real vLLM + Jaeger: one call, end to end', () => {
  let jaeger: Jaeger;
  let replica: ReplicaState;
  let g: TestGateway;
  before(async () => {
    prepare();
    jaeger = await startJaeger();
    const port = await freePort();
    replica = startReplicaProcess({ index: INDEX, port, kvEvents: { pub: await freePort(), replay: await freePort() } }, {
      extraArgs: ['--otlp-traces-endpoint', `${jaeger.otlpUrl}/v1/traces`],
      extraEnv: { OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf', OTEL_SERVICE_NAME: 'vllm' },
    });
    await waitHealthy(replica);
    g = await startGateway([replica.url], { tracing: { endpoint: jaeger.otlpUrl, batch: { scheduledDelayMs: 100 } } }, { env: {} });
    // The first request of a fresh engine pays its warm-up: not the one measured.
    await postJson(`${g.url}/v1/chat/completions`, { model: SERVED_MODEL, max_tokens: 4, messages: [{ role: 'user', content: 'warm up' }] });
  });
  after(async () => {
    await g?.close();
    await stopReplicaProcess(INDEX);
    await jaeger?.child.stop();
  });

  it('client span → warmroute SERVER span (the attempt) → vLLM llm_request, with the engine\'s phases, and the TTFTs agree with the hops', async () => {
    // Not spawnSync: the gateway runs in this process and must go on serving while the client waits.
    const r = await promisify(execFile)(VENV_PYTHON, [new URL('../../bench/real/traced-client.py', import.meta.url).pathname, `${g.url}/v1`, `${jaeger.otlpUrl}/v1/traces`, SERVED_MODEL, `${RUN} ${longText(`trace-${RUN}`, 300)}`], { encoding: 'utf8', timeout: 300_000 });
    const client = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as { traceId: string; spanId: string; ttftMs: number; contentAfterFirstChunkMs: number | null };
    let t: JaegerTrace | null = null;
    const deadline = Date.now() + 60_000;
    const names = () => new Set(t?.spans.map((s) => s.operationName) ?? []);
    while (Date.now() < deadline) {
      t = await jaegerTrace(jaeger, client.traceId);
      const n = names();
      if (['agent turn', 'POST /v1/chat/completions', 'llm_request'].every((x) => n.has(x))) break;
      await new Promise((res) => setTimeout(res, 500));
    }
    assert.ok(t, 'jaeger has the trace');
    mkdirSync(dirname(TRACE_OUT), { recursive: true });
    writeFileSync(TRACE_OUT, `${JSON.stringify({ data: [t] }, null, 1)}\n`);
    const by = (name: string) => t!.spans.filter((s) => s.operationName === name);
    const [agent] = by('agent turn');
    const [server] = by('POST /v1/chat/completions');
    const [llm] = by('llm_request');
    assert.ok(agent && server && llm, `spans in the trace: ${[...names()]}`);
    assert.equal(agent.spanID, client.spanId);
    assert.equal(parentOf(server), agent.spanID, 'warmroute\'s SERVER span is the client span\'s child');
    // Answered by its first attempt, whose context is the SERVER span's own (a failover would add a CLIENT span).
    assert.equal(by('attempt').length, 0, 'no CLIENT span for a first attempt');
    assert.equal(parentOf(llm), server.spanID, 'vLLM\'s llm_request is the SERVER span\'s child');
    assert.equal(t!.processes[server.processID].serviceName, 'warmroute');
    assert.equal(t!.processes[llm.processID].serviceName, 'vllm');
    for (const k of ['gen_ai.latency.time_in_queue', 'gen_ai.latency.time_in_model_prefill', 'gen_ai.latency.time_in_model_decode', 'gen_ai.latency.time_to_first_token']) {
      assert.equal(typeof tag(llm, k), 'number', `llm_request carries ${k}`);
    }
    const gatewayTtft = Number(tag(server, 'gen_ai.response.time_to_first_chunk')) * 1000;
    const vllmTtft = Number(tag(llm, 'gen_ai.latency.time_to_first_token')) * 1000;
    // The hops are events on the SERVER span (Jaeger's logs) at the mark each begins with, carrying its duration.
    const hop = (h: string) => server.logs.find((l) => l.fields.some((f) => f.key === 'event' && f.value === h));
    const hopMs = (h: string) => Number(hop(h)?.fields.find((f) => f.key === 'warmroute.hop.duration_ms')?.value ?? 0);
    const hops = Object.fromEntries(['parse', 'route', 'queue', 'connect', 'upstream_headers', 'upstream_first_token', 'stream'].map((h) => [h, hopMs(h)]));
    const own = hops.parse + hops.route + hops.queue + hops.connect;
    // The gateway's TTFT is its hops up to the first token, exactly (one clock: telemetry/hop-clock.ts).
    assert.ok(Math.abs(own + hops.upstream_headers + hops.upstream_first_token - gatewayTtft) < 0.01, 'the hop events tile the TTFT attribute');
    // Where the request was written to vLLM: the upstream_headers event's time (µs on the epoch, as
    // Jaeger keeps every span time). vLLM's llm_request starts at its arrival_time (time.time(),
    // the same host clock), taken when its OpenAI server starts rendering the chat (renderers/
    // base.py: the chat template and tokenizer are inside vLLM's TTFT): the gap is loopback plus
    // vLLM's HTTP server and request validation, which vLLM's own TTFT does not count.
    const sentUs = hop('upstream_headers')!.timestamp;
    const frontMs = (llm.startTime - sentUs) / 1000;
    // What is left after the gateway's own hops, the front end and the engine's TTFT is the first
    // token's way back (see BACK_MS): TTFT = own + front + vLLM TTFT + back.
    const backMs = gatewayTtft - own - frontMs - vllmTtft;
    // vLLM's TTFT ends at its first token, the gateway's at the first content: when the random-weight
    // model's first token has no text of its own (held back by vLLM's detokenizer), the content
    // comes decode steps later. The client sees that stretch as its first chunk (the role, sent on
    // the engine's first output) → its first content chunk, and it is taken out of the way back.
    const heldMs = client.contentAfterFirstChunkMs ?? 0;
    // And vLLM's API process, starved of the CPU beside its busy-polling engine on 2 shared cores,
    // can hand several tokens over at once, the first with the last (one run: the whole answer in
    // the gateway's last 1.8 ms, 100 ms "way back"): the first content cannot come later than the
    // rest of vLLM's request (e2e − TTFT) plus the way back, so that is what bounds it.
    const vllmAfterFirstMs = (Number(tag(llm, 'gen_ai.latency.e2e')) - Number(tag(llm, 'gen_ai.latency.time_to_first_token'))) * 1000;
    console.log(JSON.stringify({
      traceId: client.traceId, clientTtftMs: client.ttftMs, gatewayTtftMs: gatewayTtft, vllmTtftMs: vllmTtft,
      gatewayHopsMs: hops, gatewayOwnMs: own, vllmFrontEndMs: frontMs, backMs, contentAfterFirstChunkMs: heldMs, vllmAfterFirstMs, residualMs: gatewayTtft - vllmTtft - own,
      vllm: Object.fromEntries(llm.tags.filter((x) => x.key.startsWith('gen_ai.latency.')).map((x) => [x.key, x.value])),
    }));
    const sum = `gateway TTFT ${gatewayTtft.toFixed(2)} = own hops ${own.toFixed(2)} + vLLM front end ${frontMs.toFixed(2)} + vLLM TTFT ${vllmTtft.toFixed(2)} + back ${backMs.toFixed(2)} ms (of which ${heldMs.toFixed(2)} ms from vLLM's first chunk to its first content, at the client; vLLM after its first token ${vllmAfterFirstMs.toFixed(2)} ms)`;
    // Causality on one clock: vLLM's span starts after the gateway began to send the request (the
    // connect hop's start; the `sent` mark at its end is taken when the HTTP client reports the
    // write, which may come after vLLM has the bytes: front was −0.55 and −3.63 ms with a 5.7 ms
    // connect hop, and −27 and −155 ms on a fresh gateway's first request, whose event loop did
    // not run the mark for that long after the write), and its first token reaches the gateway
    // after vLLM took it.
    const connectUs = hop('connect')!.timestamp;
    assert.ok((llm.startTime - connectUs) / 1000 >= -SLACK_MS, `vLLM's llm_request starts before the gateway began to send the request: ${sum}`);
    assert.ok(backMs - heldMs >= -SLACK_MS && backMs - heldMs <= BACK_MS + vllmAfterFirstMs, sum);
  });

  it('warmroute probe --traces reads the real Jaeger: per request, the gateway\'s hops beside vLLM\'s queue, prefill and decode', async () => {
    // vLLM's exporter batches every 5 s (the SDK's default): the probe waits for its spans.
    const r = await runProbe({ baseUrl: g.url, model: SERVED_MODEL, trials: 2, cases: ['tiny'], maxTokens: 4, tracesUrl: jaeger.queryUrl, tracesWaitMs: 30_000 });
    console.log(formatTable(r));
    assert.ok(r.ok);
    assert.equal(r.traces!.sends.length, 2);
    for (const s of r.traces!.sends) {
      const gw = s.trace?.gateway;
      const v = s.trace?.replica;
      assert.ok(gw && v, `trace ${s.traceId}: the gateway's span and vLLM's llm_request`);
      assert.equal(v.service, 'vllm');
      assert.ok(v.prefillMs! > 0 && v.ttftMs! > 0 && gw.ttftMs! > v.ttftMs!, `gateway TTFT ${gw.ttftMs} vs vLLM's ${v.ttftMs}`);
      assert.ok(s.clientTtftMs! >= gw.ttftMs!);
    }
  });
});
