// npx tsx bench/tracing-cost.ts [--requests 20000] [--rounds 3] [--batches 512,64] [--garbage-kb 0] [--delay-ms 50]
// CPU per request of tracing alone, in one process, exported by the OTLP/HTTP exporter
// (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: http/protobuf by default, or http/json) to a loopback sink:
// - the gateway's spans of a request (telemetry/tracing: SERVER span, the first attempt's
//   context, the hop events, the attributes), sampled out, at a 10% ratio and sampled, with the
//   share of exchanges each variant exported (the ratio sampler's check);
// - the bare SDK doing the same work with nothing of ours around it: one SERVER span with the same
//   attributes and seven events, and the same with one CLIENT span beside it (the floor the SDK
//   sets, with one span and with two);
// - the bare SDK's spans not exported (a processor that drops them): creation and attributes only.
// --batches: the gateway's spans again for each export batch size listed, sampled and at 10%
// (OTEL_BSP_MAX_EXPORT_BATCH_SIZE). --delay-ms: OTEL_BSP_SCHEDULE_DELAY, 50 by default so the
// variants' exports fall inside their own rounds; the gateway's default is 5000, with which, at a
// ratio, spans wait in the queue until a whole batch is sampled (see design-notes.md, Tracing).
// --garbage-kb: each request also allocates that much short-lived
// garbage, as the gateway's own request handling does, so spans waiting in the batch queue
// outlive young-generation collections as they do in the gateway.
// The variants run interleaved, `--rounds` times each, so a load change on the machine hits all
// alike; the lowest round of each is reported. Read beside bench:ab's CPU per request of the
// whole gateway: the ratio is the share tracing adds.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import pino from 'pino';
import { ROOT_CONTEXT, SpanKind, trace as traceApi, type Attributes } from '@opentelemetry/api';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { AlwaysOnSampler, BatchSpanProcessor, TracerProvider, type SpanExporter, type SpanProcessor } from '@opentelemetry/sdk-trace';
import { resolveConfig } from '../src/config/load.js';
import { nowMs, startClock } from '../src/telemetry/hop-clock.js';
import { createMetrics } from '../src/telemetry/metrics.js';
import { createOtlpExporter } from '../src/telemetry/tracing/export.js';
import { tracingSettings, type TracingSettings } from '../src/telemetry/tracing/settings.js';
import { createTracing } from '../src/telemetry/tracing/tracing.js';

const { values } = parseArgs({ options: {
  requests: { type: 'string', default: '20000' }, rounds: { type: 'string', default: '3' },
  batches: { type: 'string', default: '' }, 'garbage-kb': { type: 'string', default: '0' }, 'delay-ms': { type: 'string', default: '50' },
} });
const GARBAGE = Math.round(Number(values['garbage-kb']) * 1024 / 64);
let kept: unknown = null;
/** Short-lived objects of about `--garbage-kb` KiB in all, the last kept until the next request so none is optimized away. */
function garbage(): void {
  if (GARBAGE === 0) return;
  const a: number[][] = [];
  for (let i = 0; i < GARBAGE; i++) a.push([i, i + 1, i + 2, i + 3, i + 4, i + 5]);
  kept = a;
}
const N = Number(values.requests);
const ROUNDS = Number(values.rounds);
let posts = 0;
let bytes = 0;
const sink = createServer((req, res) => { req.on('data', (d: Buffer) => { bytes += d.length; }); req.on('end', () => { posts++; res.end(); }); });
await new Promise<void>((r) => sink.listen(0, '127.0.0.1', () => r()));
const url = `http://127.0.0.1:${(sink.address() as AddressInfo).port}`;

const headers = { 'content-type': 'application/json', 'x-session-id': 'bench' };
const facts = {
  method: 'POST', path: '/v1/chat/completions', status: 200, outcome: 'complete', replica: '127.0.0.1:8001', reason: 'pinned', attempts: 1,
  kind: 'chat', model: 'tiny-llama', promptTokens: 2900, completionTokens: 16, cachedTokens: 2816, session: '0123456789ab',
  turnKey: '0123456789ab', turn: 3, call: 1, errorCode: null, toolCallTruncated: false,
};
/** What the gateway's SERVER span carries for a routed chat request (attributes.ts), as plain values. */
const SERVER_ATTRS: Attributes = {
  'http.request.method': 'POST', 'http.response.status_code': 200, 'warmroute.outcome': 'complete', 'warmroute.attempts': 1,
  'http.route': '/v1/chat/completions', 'warmroute.route.reason': 'pinned', 'gen_ai.operation.name': 'chat',
  'gen_ai.request.model': 'tiny-llama', 'gen_ai.response.model': 'tiny-llama', 'warmroute.replica': '127.0.0.1:8001',
  'warmroute.replica.address': '127.0.0.1', 'warmroute.replica.port': 8001, 'warmroute.cached_tokens.predicted': 2816,
  'gen_ai.usage.input_tokens': 2900, 'gen_ai.usage.output_tokens': 16, 'gen_ai.usage.cache_read.input_tokens': 2816,
  'warmroute.queue.wait_ms': 0.01, 'gen_ai.response.time_to_first_chunk': 0.0021, 'warmroute.overhead_ms': 0.4,
  'warmroute.session': '0123456789ab', 'warmroute.turn': 3, 'warmroute.turn.call': 1,
};
const CLIENT_ATTRS: Attributes = {
  'warmroute.replica': '127.0.0.1:8001', 'server.address': '127.0.0.1', 'server.port': 8001, 'warmroute.attempt': 0,
  'warmroute.attempt.kind': 'first', 'http.response.status_code': 200,
};
const HOP_NAMES = ['parse', 'route', 'queue', 'connect', 'upstream_headers', 'upstream_first_token', 'stream'];

const settingsFor = (sampler: string, batch?: string, ratio?: string): TracingSettings => {
  const file = resolveConfig({ upstreams: [{ url: 'http://127.0.0.1:1' }], tracing: { endpoint: url } }).tracing;
  return tracingSettings(file, { OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: process.env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, OTEL_TRACES_SAMPLER: sampler, OTEL_TRACES_SAMPLER_ARG: ratio, OTEL_BSP_SCHEDULE_DELAY: values['delay-ms'], OTEL_BSP_MAX_QUEUE_SIZE: '100000', OTEL_BSP_MAX_EXPORT_BATCH_SIZE: batch })!;
};

/** µs of CPU per request of `body`, the exports flushed and counted in. */
async function measure(body: () => void, flush: () => Promise<void>): Promise<number> {
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < N; i++) {
    garbage();
    body();
    // Let the batch processor's timer and the exports run as they would between requests.
    if (i % 500 === 499) await new Promise((r) => setImmediate(r));
  }
  await flush();
  const cpu = process.cpuUsage(cpu0);
  return (cpu.user + cpu.system) / N;
}

/** Per variant: spans exported of exchanges begun (the ratio sampler's check: about ratio × begun). */
const exportedOf = new Map<string, { spans: number; begun: number }>();

async function gateway(sampler: string, batch?: string, ratio?: string): Promise<number> {
  const s = settingsFor(sampler, batch, ratio);
  const tally = exportedOf.get(`${sampler}${ratio ? ` ${ratio}` : ''}`) ?? { spans: 0, begun: 0 };
  exportedOf.set(`${sampler}${ratio ? ` ${ratio}` : ''}`, tally);
  const otlp = createOtlpExporter(s);
  const exporter: SpanExporter = {
    export(spans, done) { tally.spans += spans.length; otlp.export(spans, done); },
    shutdown: () => otlp.shutdown(),
  };
  const t = createTracing(s, { log: pino({ level: 'silent' }), metrics: createMetrics({ defaultMetrics: false }), exporter });
  tally.begun += N;
  const us = await measure(() => {
    const c = startClock();
    const trace = t.begin(headers, 'POST', c.received);
    c.parsed = nowMs(); c.routed = nowMs();
    trace.routed(2816);
    c.admitted = nowMs();
    trace.attempt({ replica: '127.0.0.1:8001', origin: 'http://127.0.0.1:8001', index: 0, resume: false });
    c.sent = nowMs(); c.upstreamHeaders = nowMs(); c.firstToken = nowMs(); c.ended = nowMs();
    trace.end(c, facts);
  }, () => t.flush());
  await t.shutdown();
  return us;
}

/** The SDK alone: `clientSpan` adds a CLIENT span; `exported` false ends spans in a processor that drops them. */
async function bare(clientSpan: boolean, exported: boolean): Promise<number> {
  const s = settingsFor('always_on');
  const drop: SpanProcessor = { onStart() {}, onEnd() {}, forceFlush: () => Promise.resolve(), shutdown: () => Promise.resolve() };
  const processor = exported
    ? new BatchSpanProcessor({ exporter: createOtlpExporter(s), maxQueueSize: s.batch.maxQueueSize, maxExportBatchSize: s.batch.maxExportBatchSize, scheduledDelayMillis: s.batch.scheduledDelayMs })
    : drop;
  const provider = new TracerProvider({ resource: resourceFromAttributes({ 'service.name': 'warmroute' }), sampler: new AlwaysOnSampler(), spanProcessors: [processor] });
  const tracer = provider.getTracer('warmroute');
  const us = await measure(() => {
    const server = tracer.startSpan('POST', { kind: SpanKind.SERVER });
    if (clientSpan) {
      const client = tracer.startSpan('attempt', { kind: SpanKind.CLIENT }, traceApi.setSpan(ROOT_CONTEXT, server));
      client.setAttributes(CLIENT_ATTRS);
      client.end();
    }
    for (const h of HOP_NAMES) server.addEvent(h, { 'warmroute.hop.duration_ms': 0.1 });
    server.setAttributes(SERVER_ATTRS);
    server.end();
  }, () => provider.forceFlush());
  await provider.shutdown();
  return us;
}

const variants: [string, () => Promise<number>][] = [
  ['gateway, sampled out (always_off)', () => gateway('always_off')],
  ['gateway, 10% (parentbased_traceidratio 0.1)', () => gateway('parentbased_traceidratio', undefined, '0.1')],
  ['gateway, sampled (always_on)', () => gateway('always_on')],
  ['bare SDK: SERVER span + 7 events + attributes, exported', () => bare(false, true)],
  ['bare SDK: SERVER + CLIENT span + 7 events + attributes, exported', () => bare(true, true)],
  ['bare SDK: SERVER span + 7 events + attributes, not exported', () => bare(false, false)],
  ...values.batches.split(',').filter((b) => b !== '').flatMap((b): [string, () => Promise<number>][] => [
    [`gateway, sampled, export batches of ${b}`, () => gateway('always_on', b)],
    [`gateway, 10%, export batches of ${b}`, () => gateway('parentbased_traceidratio', b, '0.1')],
  ]),
];
await gateway('always_on'); // warm-up: JIT, the exporter's first connection
await bare(true, true);
const best = new Map<string, number>();
for (let r = 0; r < ROUNDS; r++) {
  for (const [name, run] of variants) best.set(name, Math.min(best.get(name) ?? Infinity, await run()));
}
process.stdout.write(`tracing CPU per request, ${process.env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL || 'http/protobuf'}, ${N} requests${GARBAGE ? ` with ${values['garbage-kb']} KiB of garbage each` : ''}, schedule delay ${values['delay-ms']} ms, lowest of ${ROUNDS} rounds (${posts} exports, ${(bytes / posts / 1024).toFixed(0)} KiB each on average):\n`);
for (const [name] of variants) process.stdout.write(`  ${name}: ${best.get(name)!.toFixed(1)} µs\n`);
for (const [sampler, t] of exportedOf) process.stdout.write(`  ${sampler}: ${t.spans} spans exported of ${t.begun} exchanges (${(t.spans / t.begun * 100).toFixed(1)}%)\n`);
sink.close();
void kept;
