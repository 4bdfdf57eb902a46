// telemetry/metric-batch.ts folds per-request updates into prom-client when the registry is read.
// Its histogram fold writes into prom-client's own series record: these tests hold it to
// prom-client's observe, value for value, so an upgrade that changes that record fails here.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Counter, Histogram, Registry } from 'prom-client';
import { createMetricBatch } from '../../src/telemetry/metric-batch.js';
import { createMetrics } from '../../src/telemetry/metrics.js';

const BUCKETS = [0.001, 0.01, 0.1, 1, 10];

/** The exposition with each sum to 12 significant digits: a batch adds the same values in another order. */
const exposition = async (r: Registry) => (await r.metrics()).replace(/(_sum\{[^}]*\}) (\S+)/g, (_, name: string, v: string) => `${name} ${Number(v).toPrecision(12)}`);

function pair() {
  const batch = createMetricBatch();
  const direct = new Registry();
  const batched = new Registry();
  const make = (registers: Registry[], collect?: () => void) => ({
    h: new Histogram({ name: 'wr_test_seconds', help: 'h', labelNames: ['hop'] as const, buckets: BUCKETS, registers, ...(collect ? { collect } : {}) }),
    c: new Counter({ name: 'wr_test_total', help: 'c', labelNames: ['replica', 'code'] as const, registers, ...(collect ? { collect } : {}) }),
  });
  return { batch, a: make([direct]), b: make([batched], () => batch.fold()), direct, batched };
}

test('a batched histogram and counter expose what prom-client\'s own observe and inc would, after every read', async () => {
  const { batch, a, b, direct, batched } = pair();
  const hops = ['parse', 'route'] as const;
  const bh = hops.map((hop) => batch.histogram(b.h, { hop }));
  const bc = batch.counter(b.c, { replica: 'r1', code: '2xx' });
  // Values on the bounds, between them, below the first, above the last (+Inf only), and zero.
  const values = [0, 0.001, 0.0005, 0.01, 0.05, 1, 9.99, 10, 11, 250, 0.1];
  for (let round = 0; round < 3; round++) {
    values.forEach((v, i) => {
      const hop = hops[(i + round) % 2];
      a.h.labels(hop).observe(v * (round + 1));
      bh[(i + round) % 2].observe(v * (round + 1));
      a.c.labels('r1', '2xx').inc(i);
      bc.inc(i);
    });
    assert.equal(await exposition(batched), await exposition(direct), `round ${round}`);
  }
});

test('a series never updated is not made by a fold; one updated after a reset comes back with only the new updates', async () => {
  const { batch, a, b, direct, batched } = pair();
  const h = batch.histogram(b.h, { hop: 'queue' });
  batch.counter(b.c, { replica: 'r2', code: '5xx' });
  assert.equal(await exposition(batched), await exposition(direct));
  h.observe(0.5);
  await batched.metrics();
  b.h.reset();
  h.observe(0.02);
  a.h.labels('queue').observe(0.02);
  assert.equal(await exposition(batched), await exposition(direct));
});

test('the gateway\'s per-request metrics are read through the batch: an update shows in the next scrape', async () => {
  const m = createMetrics({ defaultMetrics: false });
  m.batch.histogram(m.ttft, { route: 'pinned' }).observe(0.03);
  m.batch.counter(m.requests, { replica: 'r1', route: 'pinned', code: '2xx' }).inc();
  const text = await m.registry.metrics();
  assert.match(text, /warmroute_ttft_seconds_bucket\{le="0\.03",route="pinned"\} 1\n/);
  assert.match(text, /warmroute_ttft_seconds_count\{route="pinned"\} 1\n/);
  assert.match(text, /warmroute_requests_total\{replica="r1",route="pinned",code="2xx"\} 1\n/);
});

test('recording an exchange calls prom-client for none of its per-request series: they are read from the batch at scrape time', async () => {
  const { createRecorder } = await import('../../src/record/record.js');
  const { createRouter } = await import('../../src/routing/router.js');
  const { createMemorySessionStore } = await import('../../src/store/memory.js');
  const { startClock } = await import('../../src/telemetry/hop-clock.js');
  const pino = (await import('pino')).default;
  const m = createMetrics({ defaultMetrics: false });
  const router = createRouter('affinity', { store: createMemorySessionStore({ maxSessions: 100, ttlMs: 60_000 }) });
  const recorder = createRecorder({ metrics: m, log: pino({ level: 'silent' }), router, sessionTag: () => 'tag' });
  // Every prom-client update made while recording is counted: observe and inc, on a metric or a child.
  let calls = 0;
  const counted = <T extends object>(proto: T, name: keyof T) => {
    const f = proto[name] as (...a: unknown[]) => unknown;
    (proto as Record<keyof T, unknown>)[name] = function (this: unknown, ...a: unknown[]) { calls++; return f.apply(this, a); };
    return () => { (proto as Record<keyof T, unknown>)[name] = f; };
  };
  const restore = [counted(Histogram.prototype, 'observe'), counted(Counter.prototype, 'inc'), counted(Histogram.prototype, 'labels'), counted(Counter.prototype, 'labels')];
  const REQUESTS = 1_000;
  try {
    for (let i = 0; i < REQUESTS; i++) {
      const clock = startClock(1_000 + i);
      Object.assign(clock, { parsed: clock.received + 0.1, routed: clock.received + 0.2, admitted: clock.received + 0.3, sent: clock.received + 0.5, upstreamHeaders: clock.received + 1, firstToken: clock.received + 2, ended: clock.received + 3 });
      recorder.record({
        method: 'POST', path: '/v1/chat/completions', identity: null, clock, priority: 'interactive', key: 'team-a',
        ended: { ending: 'complete', status: 200, replica: 'r1', reason: 'pinned', attempts: 1, usage: { promptTokens: 100, cachedTokens: 64, completionTokens: 8 }, sse: true, done: true, error: null, upstreamError: null },
      });
    }
  } finally {
    for (const r of restore) r();
  }
  assert.equal(calls, 0, `${calls} prom-client updates for ${REQUESTS} requests`);
  const text = await m.registry.metrics();
  assert.match(text, new RegExp(`warmroute_hop_duration_seconds_count\\{hop="parse"\\} ${REQUESTS}\\n`));
  assert.match(text, new RegExp(`warmroute_ttft_seconds_count\\{route="pinned"\\} ${REQUESTS}\\n`));
  assert.match(text, new RegExp(`warmroute_requests_total\\{replica="r1",route="pinned",code="2xx"\\} ${REQUESTS}\\n`));
  assert.match(text, new RegExp(`warmroute_client_requests_total\\{key="team-a",code="2xx"\\} ${REQUESTS}\\n`));
  assert.match(text, new RegExp(`warmroute_class_requests_total\\{class="interactive",code="2xx"\\} ${REQUESTS}\\n`));
  assert.match(text, new RegExp(`warmroute_cached_tokens_total\\{replica="r1"\\} ${REQUESTS * 64}\\n`));
});
