// The gateway's spans over OTLP/HTTP to a tiny loopback collector: http/json decoded as received,
// http/protobuf by its content type, the OTEL_* configuration, and collectors that are down,
// refusing or too slow (requests served as before, spans dropped and counted, one warn line).
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { request } from 'undici';
import { startOtlpCollector, type OtlpCollector as Collector } from '../../bench/lib/otlp-collector.js';
import { startFixture, type FixtureUpstream } from '../helpers/fixture-upstream.js';
import { chatBody, startGateway, waitForAccess, type TestGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';

/** A loopback port nothing listens on. */
async function deadPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

const post = (g: TestGateway, headers: Record<string, string> = {}) =>
  request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: chatBody() });
const dropped = async (g: TestGateway, reason: string) =>
  Number(new RegExp(`warmroute_trace_spans_dropped_total\\{reason="${reason}"\\} (\\d+)`).exec(await (await request(`${g.adminUrl}/metrics`)).body.text())?.[1] ?? NaN);

interface JsonSpan { name: string; kind: number; traceId: string; spanId: string; parentSpanId?: string; attributes: { key: string; value: Record<string, unknown> }[] }

describe('tracing to an OTLP/HTTP collector', () => {
  let up: FixtureUpstream;
  let col: Collector;
  before(async () => {
    up = await startFixture('u');
    col = await startOtlpCollector();
  });
  after(async () => {
    await up.close();
    await col.close();
  });

  it('http/json via OTEL_EXPORTER_OTLP_ENDPOINT: the spans, the service name, resource attributes and headers as configured', async () => {
    const g = await startGateway([up.url], { tracing: { batch: { scheduledDelayMs: 5 } } }, {
      env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: col.url, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json', OTEL_SERVICE_NAME: 'gw-east',
        OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment=test,team=voice', OTEL_EXPORTER_OTLP_HEADERS: 'x-api-key=s%3Dcret',
      },
    });
    try {
      const res = await post(g, { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' });
      assert.equal(res.statusCode, 200);
      await res.body.text();
      await waitFor('an export', () => col.posts.length > 0, 10_000);
      const p = col.posts[0];
      assert.match(p.type, /application\/json/);
      assert.equal(p.headers['x-api-key'], 's=cret');
      const doc = JSON.parse(p.body.toString()) as { resourceSpans: { resource: { attributes: { key: string; value: { stringValue?: string } }[] }; scopeSpans: { spans: JsonSpan[] }[] }[] };
      const rs = doc.resourceSpans[0];
      const res0 = Object.fromEntries(rs.resource.attributes.map((a) => [a.key, a.value.stringValue]));
      assert.equal(res0['service.name'], 'gw-east');
      assert.equal(res0['deployment.environment'], 'test');
      assert.equal(res0.team, 'voice');
      const spans = rs.scopeSpans.flatMap((s) => s.spans);
      const server = spans.find((s) => s.name === 'POST /v1/chat/completions')!;
      assert.ok(server, `server span among ${spans.map((s) => s.name)}`);
      assert.equal(server.traceId, '0af7651916cd43dd8448eb211c80319c');
      assert.equal(server.parentSpanId, 'b7ad6b7169203331');
      // Answered by its first attempt: the SERVER span's context went to the replica, no CLIENT span.
      assert.deepEqual(spans.map((s) => s.name), ['POST /v1/chat/completions']);
      assert.deepEqual((server as unknown as { events: { name: string }[] }).events.map((e) => e.name), ['parse', 'route', 'queue', 'connect', 'upstream_headers', 'upstream_first_token', 'stream']);
      assert.equal(await dropped(g, 'export_failed'), 0);
    } finally {
      await g.close();
    }
  });

  it('http/protobuf by default (tracing.tracesEndpoint in the config file)', async () => {
    col.posts.length = 0;
    const g = await startGateway([up.url], { tracing: { tracesEndpoint: `${col.url}/custom/traces`, batch: { scheduledDelayMs: 5 } } }, { env: {} });
    try {
      await (await post(g)).body.text();
      await waitFor('an export', () => col.posts.length > 0, 10_000);
      assert.equal(col.posts[0].type, 'application/x-protobuf');
      // The span names are plain strings in the protobuf encoding.
      assert.ok(col.posts[0].body.includes(Buffer.from('POST /v1/chat/completions')));
    } finally {
      await g.close();
    }
  });

  it('a collector that is down: requests served as before, the spans dropped and counted, one warn line', async () => {
    const port = await deadPort();
    const g = await startGateway([up.url], { tracing: { endpoint: `http://127.0.0.1:${port}`, batch: { scheduledDelayMs: 1, maxExportBatchSize: 2 } } }, { env: { OTEL_EXPORTER_OTLP_TIMEOUT: '300' } });
    try {
      for (let i = 0; i < 6; i++) {
        const res = await post(g);
        assert.equal(res.statusCode, 200);
        await res.body.text();
      }
      await waitFor('failed exports counted', async () => (await dropped(g, 'export_failed')) >= 2 * 2, 10_000);
      const warns = g.logs.filter((l) => String(l.msg).startsWith('trace spans dropped'));
      assert.equal(warns.length, 1, 'at most one warn line a minute');
      assert.equal(warns[0].level, 40);
    } finally {
      await g.close();
    }
  });

  it('a collector that refuses (400): spans counted as dropped, requests unaffected', async () => {
    col.answer.status = 400;
    const g = await startGateway([up.url], { tracing: { endpoint: col.url, batch: { scheduledDelayMs: 1 } } }, { env: {} });
    try {
      const res = await post(g);
      assert.equal(res.statusCode, 200);
      await res.body.text();
      await waitFor('a refused export counted', async () => (await dropped(g, 'export_failed')) > 0, 10_000);
    } finally {
      col.answer.status = 200;
      await g.close();
    }
  });

  it('a collector too slow for the traffic: the queue stays bounded, the overflow counted as queue_full', async () => {
    col.answer.hold = true;
    col.posts.length = 0;
    const g = await startGateway([up.url], { tracing: { endpoint: col.url, batch: { scheduledDelayMs: 1, maxQueueSize: 20, maxExportBatchSize: 10 } } }, { env: {} });
    try {
      // One span a request (the SERVER span, the first attempt's too): the open exports and the queue fill up.
      for (let i = 0; i < 80; i++) {
        const res = await post(g);
        assert.equal(res.statusCode, 200);
        await res.body.text();
      }
      await waitForAccess(g, (l) => l.length >= 80);
      await waitFor('overflow counted', async () => (await dropped(g, 'queue_full')) > 0, 10_000);
      // Spans held at once: two open exports of 10 and a queue of 20; every other one is counted.
      const q = await dropped(g, 'queue_full');
      const e = await dropped(g, 'export_failed');
      assert.ok(q + e >= 80 - 2 * 10 - 20, `dropped ${q} + ${e}`);
    } finally {
      col.answer.hold = false;
      col.release();
      await g.close();
    }
  });
});
