// The gateway's spans, on real sockets, into an in-memory exporter: the tree (caller → SERVER →
// the attempts' contexts → what the replica receives), the hop events against the access line's clock,
// attributes, failover, resume, sampling, turns, and tracing switched off.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { request } from 'undici';
import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace';
import { DEFAULT_MODEL, startReplica, type SimReplica } from '../../bench/sim/index.js';
import { startFixture, type FixtureUpstream } from '../helpers/fixture-upstream.js';
import { chatBody, startGateway, waitForAccess, type TestGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';

const CALLER_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const CALLER_SPAN = '00f067aa0ba902b7';
const traced = (raw: Record<string, unknown> = {}) => ({
  ...raw,
  tracing: { tracesEndpoint: 'http://127.0.0.1:9/v1/traces', batch: { scheduledDelayMs: 5 }, ...(raw.tracing as object ?? {}) },
});

const post = (g: TestGateway, headers: Record<string, string>, body = chatBody()) =>
  request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });

/** The spans of one trace once its SERVER span is exported. */
async function traceOf(mem: InMemorySpanExporter, traceId: string | null, count = 1): Promise<ReadableSpan[]> {
  let spans: ReadableSpan[] = [];
  await waitFor(`${count} server span(s) of trace ${traceId}`, () => {
    spans = mem.getFinishedSpans().filter((s) => traceId === null || s.spanContext().traceId === traceId);
    return spans.filter((s) => s.kind === SpanKind.SERVER).length >= count;
  });
  return spans;
}
/** A call forwarded, not the gateway's own health probe or metrics scrape. */
const isCall = (q: { method: string; url: string }) => q.method === 'POST' && q.url.startsWith('/v1/');
const parentOf = (s: ReadableSpan) => s.parentSpanContext?.spanId ?? null;
const ms = (t: [number, number]) => t[0] * 1e3 + t[1] / 1e6;

describe('tracing: spans of an exchange', () => {
  let ups: FixtureUpstream[];
  let g: TestGateway;
  const mem = new InMemorySpanExporter();
  before(async () => {
    ups = await Promise.all(['a', 'b'].map((n) => startFixture(n)));
    g = await startGateway(ups.map((u) => u.url), traced(), { env: {}, traceExporter: mem });
  });
  after(async () => {
    await g.close();
    await Promise.all(ups.map((u) => u.close()));
  });

  it("joins the caller's trace: SERVER span under the caller's, and the first attempt's context is the SERVER span's own: the replica receives it", async () => {
    const res = await post(g, { traceparent: `00-${CALLER_TRACE}-${CALLER_SPAN}-01`, tracestate: 'vendor=abc', 'x-session-id': 'caller-secret-key' });
    assert.equal(res.statusCode, 200);
    await res.body.text();
    const spans = await traceOf(mem, CALLER_TRACE);
    const server = spans.find((s) => s.kind === SpanKind.SERVER)!;
    assert.equal(parentOf(server), CALLER_SPAN);
    assert.equal(server.name, 'POST /v1/chat/completions');
    assert.equal(spans.length, 1, 'one span: no CLIENT span for an exchange answered by its first attempt');
    // What the replica got: the SERVER span's context (the client's is not passed through), and the caller's tracestate.
    const seen = ups.flatMap((u) => u.seen).filter(isCall).at(-1)!;
    assert.equal(seen.headers.traceparent, `00-${CALLER_TRACE}-${server.spanContext().spanId}-01`);
    assert.equal(seen.headers.tracestate, 'vendor=abc');
    const replica = ups.find((u) => u.seen.includes(seen))!;
    assert.equal(server.attributes['warmroute.replica.address'], '127.0.0.1');
    assert.equal(server.attributes['warmroute.replica.port'], replica.port);
    assert.equal(server.attributes['http.request.method'], 'POST');
    assert.equal(server.attributes['http.response.status_code'], 200);
    assert.equal(server.events.filter((e) => e.name === 'attempt_failed').length, 0);
  });

  it('hop events carry the same clock readings as the access line, and tile the SERVER span', async () => {
    mem.reset();
    const res = await post(g, { traceparent: `00-${CALLER_TRACE.replace('4b', '5b')}-${CALLER_SPAN}-01`, 'x-session-id': 'hops' });
    await res.body.text();
    const spans = await traceOf(mem, CALLER_TRACE.replace('4b', '5b'));
    const [line] = (await waitForAccess(g, (l) => l.some((x) => x.session !== null && x.ttftMs !== null && l.length > 0))).slice(-1);
    const server = spans.find((s) => s.kind === SpanKind.SERVER)!;
    const hop = (name: string) => server.events.find((e) => e.name === name)!;
    const fields: Record<string, string> = { parse: 'parseMs', route: 'routeMs', queue: 'queueMs', connect: 'connectMs', upstream_headers: 'upstreamHeadersMs', upstream_first_token: 'upstreamFirstTokenMs', stream: 'streamMs' };
    let at = ms(server.startTime);
    for (const [name, field] of Object.entries(fields)) {
      const h = hop(name);
      assert.ok(h, `hop ${name}`);
      const d = h.attributes!['warmroute.hop.duration_ms'] as number;
      assert.ok(Math.abs(d - line[field]) < 0.002, `${name}: event ${d} ms, access line ${line[field]} ms`);
      assert.ok(Math.abs(ms(h.time) - at) < 0.002, `${name} starts where the previous hop ended`);
      at = ms(h.time) + d;
    }
    assert.deepEqual(server.events.map((e) => e.name), Object.keys(fields), 'in order');
    assert.ok(Math.abs(at - ms(server.endTime)) < 0.002, 'the stream hop ends with the SERVER span');
    assert.ok(Math.abs((server.attributes['gen_ai.response.time_to_first_chunk'] as number) * 1000 - line.ttftMs) < 0.002);
  });

  it('attributes: GenAI conventions, warmroute.*; the session only as its log tag, never the key or prompt text', async () => {
    mem.reset();
    const res = await post(g, { 'x-session-id': 'caller-secret-key' }, chatBody({}, 'my very private prompt words'));
    await res.body.text();
    const spans = await traceOf(mem, null);
    const server = spans.find((s) => s.kind === SpanKind.SERVER)!;
    assert.equal(parentOf(server), null, 'no traceparent: a new trace');
    const lines = await waitForAccess(g, (l) => l.some((x) => x.session !== null));
    const line = lines.at(-1)!;
    const a = server.attributes;
    assert.equal(a['gen_ai.operation.name'], 'chat');
    assert.equal(a['gen_ai.request.model'], 'fixture-model');
    assert.equal(a['gen_ai.response.model'], 'fixture-model');
    assert.equal(a['gen_ai.usage.input_tokens'], line.promptTokens);
    assert.equal(a['gen_ai.usage.output_tokens'], 3);
    assert.equal(a['gen_ai.usage.cache_read.input_tokens'], 32);
    assert.equal(typeof a['warmroute.cached_tokens.predicted'], 'number');
    assert.equal(a['warmroute.route.reason'], line.route);
    assert.equal(a['warmroute.replica'], line.replica);
    assert.equal(a['warmroute.outcome'], 'complete');
    assert.equal(a['warmroute.attempts'], 1);
    assert.equal(typeof a['warmroute.queue.wait_ms'], 'number');
    assert.equal(a['warmroute.session'], line.session);
    assert.equal(a['warmroute.turn'], line.turn);
    assert.equal(a['warmroute.turn.call'], line.call);
    assert.equal(a['http.response.status_code'], 200);
    const everything = JSON.stringify(spans.map((s) => [s.name, s.attributes, s.events, s.links]));
    assert.ok(!everything.includes('caller-secret-key'), 'the raw session key is in no span');
    assert.ok(!everything.includes('private prompt'), 'no prompt text in any span');
  });

  it('failover: the first attempt is the SERVER span\'s, its failure an event; the failover a CLIENT span of its own; each replica sent its attempt\'s context', async () => {
    mem.reset();
    const before = ups.map((u) => u.seen.length);
    const res = await post(g, { 'x-fixture-status': '503', traceparent: `00-${CALLER_TRACE.replace('4b', '6b')}-${CALLER_SPAN}-01` });
    assert.equal(res.statusCode, 503);
    await res.body.text();
    const spans = await traceOf(mem, CALLER_TRACE.replace('4b', '6b'));
    const server = spans.find((s) => s.kind === SpanKind.SERVER)!;
    const attempts = spans.filter((s) => s.kind === SpanKind.CLIENT);
    assert.deepEqual(attempts.map((s) => [s.name, s.attributes['warmroute.attempt.kind'], s.attributes['warmroute.attempt']]), [['attempt', 'failover', 1]]);
    assert.equal(parentOf(attempts[0]), server.spanContext().spanId);
    assert.equal(attempts[0].status.code, SpanStatusCode.ERROR);
    assert.equal(typeof attempts[0].attributes['server.port'], 'number');
    const failed = server.events.filter((e) => e.name === 'attempt_failed');
    assert.equal(failed.length, 1, 'the first attempt\'s failure, on the SERVER span');
    assert.equal(typeof failed[0].attributes!['error.type'], 'string');
    assert.notEqual(failed[0].attributes!['warmroute.replica'], attempts[0].attributes['warmroute.replica'], 'another replica');
    assert.equal(server.attributes['warmroute.replica.address'], undefined, 'the first attempt did not answer');
    assert.equal(server.attributes['warmroute.attempts'], 2);
    assert.equal(server.status.code, SpanStatusCode.ERROR);
    const sent = ups.flatMap((u, i) => u.seen.slice(before[i])).filter(isCall).map((q) => String(q.headers.traceparent).split('-')[2]);
    assert.deepEqual(sent.sort(), [server.spanContext().spanId, attempts[0].spanContext().spanId].sort());
  });

  it("a caller's unsampled context is honoured (parent-based): nothing exported, the flag goes on to the replica", async () => {
    mem.reset();
    const id = CALLER_TRACE.replace('4b', '7b');
    const res = await post(g, { traceparent: `00-${id}-${CALLER_SPAN}-00` });
    await res.body.text();
    await waitForAccess(g, () => true);
    const seen = ups.flatMap((u) => u.seen).filter(isCall).find((q) => String(q.headers.traceparent).includes(id));
    assert.ok(seen, 'the replica got the trace id');
    assert.match(String(seen.headers.traceparent), new RegExp(`^00-${id}-[0-9a-f]{16}-00$`));
    assert.notEqual(String(seen.headers.traceparent).split('-')[2], CALLER_SPAN, 'a context of its own, not the caller\'s span');
    // A sampled request after it is exported: had the unsampled one been, it would be there first.
    const next = await post(g, { traceparent: `00-${CALLER_TRACE.replace('4b', '8b')}-${CALLER_SPAN}-01` });
    await next.body.text();
    await traceOf(mem, CALLER_TRACE.replace('4b', '8b'));
    assert.equal(mem.getFinishedSpans().filter((s) => s.spanContext().traceId === id).length, 0);
  });

  it("the calls of one caller turn link to the turn's first call", async () => {
    mem.reset();
    const body = chatBody({}, 'Book me a table for two');
    for (let i = 0; i < 3; i++) await (await post(g, { 'x-session-id': 'turn-links' }, body)).body.text();
    const spans = await traceOf(mem, null, 3);
    const servers = spans.filter((s) => s.kind === SpanKind.SERVER);
    const first = servers.find((s) => s.attributes['warmroute.turn.call'] === 0)!;
    assert.ok(first);
    const later = servers.filter((s) => s !== first);
    assert.equal(later.length, 2);
    for (const s of later) {
      assert.equal(s.attributes['warmroute.turn'], first.attributes['warmroute.turn']);
      assert.deepEqual(s.links.map((l) => l.context.spanId), [first.spanContext().spanId]);
    }
  });
});

describe('tracing: resume and sampling', () => {
  const FAST = { frontendMs: 0.5, tokenizeMsPerToken: 0, stepBaseMs: 2, prefillMsPerToken: 0.001, attnMsPerTokenPair: 0, decodeMsPerSeq: 0, decodeMsPerCtxToken: 0, outputTokens: { min: 30, max: 30 } };
  let rs: SimReplica[];
  let g: TestGateway;
  const mem = new InMemorySpanExporter();
  before(async () => {
    rs = await Promise.all([0, 1].map(() => startReplica(FAST)));
    g = await startGateway(rs.map((r) => r.url), traced({ resume: { enabled: true } }), { env: {}, traceExporter: mem });
  });
  after(async () => {
    await g.close();
    await Promise.all(rs.map((r) => r.close()));
  });
  const chat = (session: string, traceparent?: string) => request(`${g.url}/v1/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json', 'x-session-id': session, ...(traceparent ? { traceparent } : {}) },
    body: JSON.stringify({ model: DEFAULT_MODEL, stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'Tell me about the opening hours of the clinic.' }] }),
  });

  it('a stream resumed on another replica: the break is an event on the SERVER span (the first attempt\'s), the continuation has a CLIENT span of its own', async () => {
    const first = await chat('resume-trace');
    await first.body.text();
    const home = rs.find((r) => String(first.headers['x-warmroute-replica']).endsWith(`:${r.port}`))!;
    home.fault({ kind: 'die-mid-stream', afterChunks: 5, times: 1 });
    const id = CALLER_TRACE.replace('4b', '9b');
    const res = await chat('resume-trace', `00-${id}-${CALLER_SPAN}-01`);
    assert.equal(res.statusCode, 200);
    assert.match(await res.body.text(), /\[DONE\]/);
    const spans = await traceOf(mem, id);
    const server = spans.find((s) => s.kind === SpanKind.SERVER)!;
    const attempts = spans.filter((s) => s.kind === SpanKind.CLIENT);
    assert.deepEqual(attempts.map((s) => [s.name, s.attributes['warmroute.attempt.kind']]), [['resume', 'resume']]);
    assert.notEqual(attempts[0].status.code, SpanStatusCode.ERROR);
    assert.equal(parentOf(attempts[0]), server.spanContext().spanId);
    const broke = server.events.filter((e) => e.name === 'attempt_failed');
    assert.equal(broke.length, 1);
    assert.notEqual(broke[0].attributes!['warmroute.replica'], attempts[0].attributes['warmroute.replica']);
    assert.ok(ms(broke[0].time) <= ms(attempts[0].startTime) + 0.001, 'the continuation starts after the break');
    assert.equal(server.attributes['warmroute.outcome'], 'complete');
  });

  it('traceidratio 0 (OTEL_TRACES_SAMPLER): a new trace is not sampled, nothing is exported', async () => {
    const mem0 = new InMemorySpanExporter();
    const g0 = await startGateway(rs.map((r) => r.url), traced(), { env: { OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0' }, traceExporter: mem0 });
    try {
      for (let i = 0; i < 5; i++) await (await request(`${g0.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: DEFAULT_MODEL, messages: [{ role: 'user', content: `hi ${i}` }] }) })).body.text();
      await waitForAccess(g0, (l) => l.length >= 5);
      await g0.gw.close();
      assert.equal(mem0.getFinishedSpans().length, 0);
    } finally {
      await g0.close();
    }
  });
});

describe('tracing off', () => {
  let up: FixtureUpstream;
  before(async () => { up = await startFixture('off'); });
  after(async () => { await up.close(); });

  for (const [what, raw, env] of [
    ['no traces endpoint', {}, {}],
    ['OTEL_SDK_DISABLED=true over a configured endpoint', traced(), { OTEL_SDK_DISABLED: 'true' }],
  ] as const) {
    it(`${what}: no span, the client's traceparent passes through unchanged`, async () => {
      const mem = new InMemorySpanExporter();
      const g = await startGateway([up.url], raw, { env, traceExporter: mem });
      try {
        const tp = `00-${CALLER_TRACE}-${CALLER_SPAN}-01`;
        await (await post(g, { traceparent: tp })).body.text();
        await waitForAccess(g, (l) => l.length >= 1);
        assert.equal(up.seen.filter(isCall).at(-1)!.headers.traceparent, tp);
        assert.ok(!g.logs.some((l) => l.msg === 'tracing on'));
      } finally {
        await g.close();
      }
      assert.equal(mem.getFinishedSpans().length, 0);
    });
  }
});

describe('tracing: a tool call cut by the token limit', () => {
  let sim: SimReplica;
  let g: TestGateway;
  const mem = new InMemorySpanExporter();
  before(async () => {
    sim = await startReplica({});
    g = await startGateway([sim.url], traced({ tools: { minMaxTokens: 0 } }), { env: {}, traceExporter: mem });
  });
  after(async () => { await g.close(); await sim.close(); });

  const toolTurn = (maxTokens: number | null) => JSON.stringify({
    model: DEFAULT_MODEL, stream: true, ...(maxTokens === null ? {} : { max_tokens: maxTokens }),
    messages: [{ role: 'user', content: 'Please call update_booking: two seats, Friday.' }],
    tools: [{ type: 'function', function: { name: 'update_booking', parameters: { type: 'object', properties: { date: { type: 'string' }, seats: { type: 'integer' }, note: { type: 'string' } } } } }],
    tool_choice: { type: 'function', function: { name: 'update_booking' } },
  });

  it('marks the SERVER span warmroute.tool_calls.truncated; a whole call has no such attribute', async () => {
    for (const maxTokens of [12, null]) {
      const res = await post(g, {}, toolTurn(maxTokens));
      assert.equal(res.statusCode, 200);
      await res.body.text();
    }
    const servers = (await traceOf(mem, null, 2)).filter((s) => s.kind === SpanKind.SERVER);
    assert.deepEqual(servers.map((s) => s.attributes['warmroute.tool_calls.truncated']), [true, undefined]);
  });
});
