// `warmroute probe --traces`: a traceparent per request, each trace read back from a query API that
// answers as Jaeger's does (the loopback collector), the gateway's hops beside the simulated
// replica's llm_request phases.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { startOtlpCollector, type OtlpCollector } from '../../bench/lib/otlp-collector.js';
import { startFleet, type SimFleet } from '../../bench/sim/index.js';
import { formatTable } from '../../src/probe/report.js';
import { runProbe } from '../../src/probe/run.js';
import { probeMain } from '../../src/probe/index.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';

/** The sim's API-server latency before its engine sees a request (its llm_request span starts then). */
const FRONTEND_MS = 30;
/** What the trace clocks of two processes, and a busy machine's scheduling, may take off a span's measured front. */
const CLOCK_SLACK_MS = 10;

describe('probe --traces', () => {
  let col: OtlpCollector;
  let fleet: SimFleet;
  let g: TestGateway;
  before(async () => {
    col = await startOtlpCollector();
    // A front end long against the few ms by which two processes' trace clocks (each its time origin
    // plus a monotonic clock) can disagree: front is one process's mark against the other's.
    fleet = await startFleet({ replicas: 2, outputTokens: { min: 4, max: 8 }, frontendMs: FRONTEND_MS, otlpTracesEndpoint: `${col.url}/v1/traces` });
    g = await startGateway(fleet.urls, { tracing: { endpoint: col.url, protocol: 'http/json', batch: { scheduledDelayMs: 20 } } }, { env: {} });
  });
  after(async () => {
    await g.close();
    await fleet.close();
    await col.close();
  });

  it('per request: the gateway\'s TTFT and hops, the replica\'s queue, prefill and decode, from one trace', async () => {
    const r = await runProbe({
      baseUrl: g.url, compareUrl: fleet.urls[0], model: fleet.replicas[0].config.model,
      trials: 1, cases: ['tiny', 'repeat9k'], scale: 0.5, tracesUrl: col.url, tracesWaitMs: 20_000,
    });
    assert.ok(r.ok);
    assert.ok(r.traces);
    // tiny, repeat9k 1st and 2nd, on each of the two endpoints.
    assert.equal(r.traces.sends.length, 6);
    assert.equal(new Set(r.traces.sends.map((s) => s.traceId)).size, 6, 'a trace of its own per request');
    for (const s of r.traces.sends) {
      assert.ok(s.trace?.replica, `${s.endpoint} ${s.case} ${s.send}: the replica's llm_request`);
      const v = s.trace.replica;
      assert.ok(v.queueMs !== null && v.prefillMs! > 0 && v.decodeMs! > 0 && v.ttftMs! > 0);
      assert.ok(s.clientTtftMs! >= v.ttftMs!, 'the client waits at least as long as the engine');
    }
    const via = r.traces.sends.filter((s) => s.endpoint === 'A');
    const direct = r.traces.sends.filter((s) => s.endpoint === 'B');
    assert.ok(direct.every((s) => s.trace!.gateway === null), 'straight to the replica: no gateway span');
    for (const s of via) {
      const gw = s.trace!.gateway!;
      assert.ok(gw, 'through the gateway: its SERVER span');
      assert.ok(fleet.urls.includes(`http://${gw.replica}`) && gw.route, `the replica and the route reason: ${gw.replica} ${gw.route}`);
      assert.deepEqual(Object.keys(gw.hopsMs), ['parse', 'route', 'queue', 'connect', 'upstream_headers', 'upstream_first_token', 'stream']);
      const own = gw.hopsMs.parse! + gw.hopsMs.route! + gw.hopsMs.queue! + gw.hopsMs.connect!;
      assert.ok(Math.abs(own - gw.ownMs!) < 0.01, 'own = parse + route + queue + connect');
      // Between the gateway's hops and the engine: the replica's API server (the sim's frontendMs before its engine queue).
      assert.ok(s.trace!.betweenMs! >= FRONTEND_MS - CLOCK_SLACK_MS, `between ${s.trace!.betweenMs} ms`);
      assert.ok(Math.abs(s.trace!.frontMs! + s.trace!.backMs! - s.trace!.betweenMs!) < 1e-9, 'front + back = between');
      assert.ok(s.trace!.frontMs! >= FRONTEND_MS - CLOCK_SLACK_MS, `front ${s.trace!.frontMs} ms: the sim's front end is before its llm_request starts`);
      assert.ok(s.clientTtftMs! >= gw.ttftMs!);
    }
    // The repeated prompt: cold prefill first, the cache served the second (cached tokens, short prefill).
    const [cold, warm] = [via.find((s) => s.send === 'first')!, via.find((s) => s.send === 'second')!];
    assert.ok(warm.trace!.gateway!.cachedTokens! > 1000 && (cold.trace!.gateway!.cachedTokens ?? 0) < 100);
    assert.ok(warm.trace!.replica!.prefillMs! * 3 < cold.trace!.replica!.prefillMs!, `prefill warm ${warm.trace!.replica!.prefillMs} vs cold ${cold.trace!.replica!.prefillMs}`);

    const table = formatTable(r);
    assert.match(table, /traces from http:\/\/127\.0\.0\.1:\d+, per request/);
    assert.match(table, /repeat9k 2nd\s+A\s+1\s/);
    assert.match(table, /127\.0\.0\.1:\d+ · (prefix|placed|pinned)/);
  });

  it('a query API that cannot be reached: exit 2 before any request', async () => {
    let err = '';
    const errs = { write: (s: string) => { err += s; return true; } } as unknown as NodeJS.WritableStream;
    const out = { write: () => true } as unknown as NodeJS.WritableStream;
    const before = fleet.replicas[0].counters().requests + fleet.replicas[1].counters().requests;
    const code = await probeMain(['--base-url', g.url, '--model', fleet.replicas[0].config.model, '--trials', '1', '--cases', 'tiny', '--traces', 'http://127.0.0.1:1'], out, errs);
    assert.equal(code, 2);
    assert.match(err, /cannot read traces from http:\/\/127\.0\.0\.1:1/);
    assert.equal(fleet.replicas[0].counters().requests + fleet.replicas[1].counters().requests, before);
  });
});

describe('probe --traces reads what a real Jaeger serves', () => {
  // docs/trace.json is a trace as Jaeger v2 served it from the real-fleet run (microseconds, float64
  // tags, events as logs): the parts come out in ms and agree with the spans' own durations.
  it('docs/trace.json: the gateway\'s part, vLLM\'s part and what lies between, in ms', async () => {
    const { readFileSync } = await import('node:fs');
    const { breakdown } = await import('../../src/probe/traces.js');
    const doc = JSON.parse(readFileSync(new URL('../../docs/trace.json', import.meta.url), 'utf8')) as { data: Parameters<typeof breakdown>[0][] };
    const t = doc.data[0];
    const b = breakdown(t);
    const gw = b.gateway!;
    const v = b.replica!;
    const durMs = (name: string) => t.spans.find((s) => s.operationName === name)!.duration / 1000;
    assert.equal(v.service, 'vllm');
    assert.ok(gw.route && gw.replica && gw.attempts === 1);
    const hops = gw.hopsMs as Record<string, number>;
    const sum = (names: string[]) => names.reduce((n, h) => n + hops[h], 0);
    assert.ok(Math.abs(sum(['parse', 'route', 'queue', 'connect']) - gw.ownMs!) < 0.01, 'own = the first four hops');
    assert.ok(Math.abs(sum(['parse', 'route', 'queue', 'connect', 'upstream_headers', 'upstream_first_token']) - gw.ttftMs!) < 0.1, 'the hops up to the first token tile the TTFT');
    assert.ok(Math.abs(sum(Object.keys(hops)) - durMs('POST /v1/chat/completions')) < 0.1, 'every hop tiles the SERVER span');
    assert.ok(Math.abs(v.ttftMs! + v.decodeMs! - durMs('llm_request')) < 20, 'vLLM: TTFT + decode ≈ its span');
    assert.ok(v.prefillMs! > 0 && v.prefillMs! <= v.ttftMs! && v.queueMs! >= 0);
    assert.ok(Math.abs(b.betweenMs! - (gw.ttftMs! - v.ttftMs! - gw.ownMs!)) < 1e-9 && b.betweenMs! > 0);
    // llm_request starts after the gateway wrote the request; the way back is the rest, a few ms.
    assert.ok(b.frontMs! >= -1 && b.backMs! >= -1 && b.backMs! <= 5, `front ${b.frontMs} ms, back ${b.backMs} ms`);
    assert.ok(Math.abs(b.frontMs! + b.backMs! - b.betweenMs!) < 1e-9);
  });
});
