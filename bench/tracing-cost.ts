// npx tsx bench/tracing-cost.ts [--requests 20000]
// CPU per request of tracing alone, in one process: the spans of a request (SERVER span, one
// attempt, the hop events, the attributes) begun, ended, batched and encoded by the OTLP/HTTP
// protobuf exporter to a loopback sink, against the same loop sampled out. Read beside bench:ab's
// CPU per request of the whole gateway: the ratio is the share tracing adds.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import pino from 'pino';
import { resolveConfig } from '../src/config/load.js';
import { nowMs, startClock } from '../src/telemetry/hop-clock.js';
import { createMetrics } from '../src/telemetry/metrics.js';
import { tracingSettings } from '../src/telemetry/tracing/settings.js';
import { createTracing } from '../src/telemetry/tracing/tracing.js';

const { values } = parseArgs({ options: { requests: { type: 'string', default: '20000' } } });
const N = Number(values.requests);
let posts = 0;
const sink = createServer((req, res) => { req.resume(); req.on('end', () => { posts++; res.end(); }); });
await new Promise<void>((r) => sink.listen(0, '127.0.0.1', () => r()));
const url = `http://127.0.0.1:${(sink.address() as AddressInfo).port}`;

const headers = { 'content-type': 'application/json', 'x-session-id': 'bench' };
const facts = {
  method: 'POST', path: '/v1/chat/completions', status: 200, outcome: 'complete', replica: '127.0.0.1:8001', reason: 'pinned', attempts: 1,
  kind: 'chat', model: 'tiny-llama', promptTokens: 2900, completionTokens: 16, cachedTokens: 2816, session: '0123456789ab',
  turnKey: '0123456789ab', turn: 3, call: 1, errorCode: null,
};

async function run(sampler: string): Promise<number> {
  const file = resolveConfig({ upstreams: [{ url: 'http://127.0.0.1:1' }], tracing: { endpoint: url } }).tracing;
  const t = createTracing(tracingSettings(file, { OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: process.env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, OTEL_TRACES_SAMPLER: sampler, OTEL_BSP_SCHEDULE_DELAY: '50', OTEL_BSP_MAX_QUEUE_SIZE: '100000' })!, { log: pino({ level: 'silent' }), metrics: createMetrics({ defaultMetrics: false }) });
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < N; i++) {
    const c = startClock();
    const trace = t.begin(headers, 'POST', c.received);
    c.parsed = nowMs(); c.routed = nowMs();
    trace.routed(2816);
    c.admitted = nowMs();
    trace.attempt({ replica: '127.0.0.1:8001', origin: 'http://127.0.0.1:8001', index: 0, resume: false });
    c.sent = nowMs(); c.upstreamHeaders = nowMs(); c.firstToken = nowMs(); c.ended = nowMs();
    trace.end(c, facts);
    // Let the batch processor's timer and the exports run as they would between requests.
    if (i % 500 === 499) await new Promise((r) => setImmediate(r));
  }
  await t.flush();
  const cpu = process.cpuUsage(cpu0);
  await t.shutdown();
  return (cpu.user + cpu.system) / N;
}

await run('always_on'); // warm-up: JIT, the exporter's first connection
const off = await run('always_off');
const on = await run('always_on');
process.stdout.write(`tracing CPU per request over ${N} requests: sampled out ${off.toFixed(1)} µs, sampled (always_on, exported to a loopback OTLP/HTTP sink, ${posts} posts) ${on.toFixed(1)} µs\n`);
sink.close();
