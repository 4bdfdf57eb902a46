import assert from 'node:assert/strict';
import { after, test } from 'node:test';

import { runProbe } from '../../src/probe/run.js';
import { closedPort, startFixture, type Fixture, type RecordedRequest } from './fixture.js';

const open: Fixture[] = [];
after(() => Promise.all(open.map((f) => f.close())));
async function fixture(...args: Parameters<typeof startFixture>): Promise<Fixture> {
  const f = await startFixture(...args);
  open.push(f);
  return f;
}

test('TTFT runs to the first CONTENT chunk, not the headers or the role chunk', async () => {
  const f = await fixture({ behave: () => ({ firstContentDelayMs: 150 }) });
  const r = await runProbe({ baseUrl: f.url, model: 'm', trials: 3, cases: ['tiny'] });
  const row = r.rows[0].results[0];
  assert.equal(row.ok, 3);
  assert.ok(row.ttftMs!.min >= 148, `min ${row.ttftMs!.min} ms must include the 150 ms delay`);
  assert.ok(row.ttftMs!.max < 1_500, `max ${row.ttftMs!.max} ms`);
  // Headers and the role chunk left together, well before the content. The fixture and the probe
  // share one event loop: when it is busy, both can be read in one go however far apart they were
  // sent, so this holds for the median trial, not for every one.
  const gaps = row.samples.map((s) => s.ttftMs! - s.headersMs!).sort((a, b) => a - b);
  assert.ok(gaps[1] > 75, `content after headers, ms: ${gaps.map((g) => g.toFixed(1))}`);
});

test('a tool-call chunk ends the clock too', async () => {
  const f = await fixture({ behave: () => ({ toolCall: true, firstContentDelayMs: 30 }) });
  const r = await runProbe({ baseUrl: f.url, model: 'm', trials: 1, cases: ['tiny'] });
  assert.ok(r.rows[0].results[0].ttftMs!.median >= 28);
});

test('one warm connection: warm-up GET /v1/models, then every trial on the same socket', async () => {
  const f = await fixture();
  const r = await runProbe({ baseUrl: `${f.url}/v1/`, model: 'm', trials: 3, scale: 0.05 });
  assert.equal(f.requests[0].method, 'GET');
  assert.equal(f.requests[0].path, '/v1/models');
  assert.equal(f.chatRequests().length, 3 * 5, 'tiny, fresh1k, cold5k + two sends of repeat9k, x3');
  assert.equal(f.requestSockets(), 1, 'all HTTP requests shared one socket');
  assert.equal(r.endpoints[0].connections, 1);
  // The bare TCP connects are separate sockets that carried no request.
  assert.equal(r.endpoints[0].tcpConnectMs?.n, 3);
  assert.ok(r.ok);
});

test('request shape: streaming body, usage requested, auth and custom headers, base URL forms', async () => {
  const f = await fixture();
  await runProbe({
    baseUrl: f.url,
    model: 'gemma',
    trials: 1,
    cases: ['cold5k'],
    maxTokens: 3,
    apiKey: 'sk-test',
    headers: { 'X-Session-Id': 'abc' },
  });
  const [req] = f.chatRequests();
  assert.equal(req.path, '/v1/chat/completions');
  assert.equal(req.headers.authorization, 'Bearer sk-test');
  assert.equal(req.headers['x-session-id'], 'abc');
  assert.equal(f.requests[0].headers.authorization, 'Bearer sk-test', 'warm-up is authenticated too');
  const body = JSON.parse(req.body);
  assert.equal(body.model, 'gemma');
  assert.equal(body.stream, true);
  assert.deepEqual(body.stream_options, { include_usage: true });
  assert.equal(body.max_tokens, 3);
  assert.deepEqual(body.messages.map((m: { role: string }) => m.role), ['system', 'user']);
  assert.ok(body.messages[0].content.length > 20_000, 'full-size cold5k prompt');

  // An explicit Authorization header wins over the key.
  const g = await fixture();
  await runProbe({ baseUrl: g.url, model: 'm', trials: 1, cases: ['tiny'], apiKey: 'k', headers: { Authorization: 'Basic x' } });
  assert.equal(g.chatRequests()[0].headers.authorization, 'Basic x');
});

test('repeat9k sends identical bytes twice per trial; nonces differ across trials', async () => {
  const f = await fixture({
    // Report a cache hit on the second send of each pair, like a warm replica would.
    behave: (i) => ({ promptTokens: 900, cachedTokens: i % 2 === 1 ? 896 : 0, firstContentDelayMs: i % 2 === 1 ? 5 : 40 }),
  });
  const r = await runProbe({ baseUrl: f.url, model: 'm', trials: 3, cases: ['repeat9k'], scale: 0.1 });
  const bodies = f.chatRequests().map((x) => x.body);
  assert.equal(bodies.length, 6);
  for (let i = 0; i < 6; i += 2) assert.equal(bodies[i], bodies[i + 1], 'second send is byte-identical');
  assert.equal(new Set(bodies).size, 3, 'each trial has its own nonce');

  const [first, second] = r.rows;
  assert.deepEqual([first.send, second.send], ['first', 'second']);
  assert.equal(first.results[0].cachedTokens, 0);
  assert.equal(second.results[0].cachedTokens, 896);
  assert.equal(second.results[0].promptTokens, 900);
  assert.ok(first.results[0].ttftMs!.median > second.results[0].ttftMs!.median);
});

test('--compare interleaves A, B, A, B with a separate nonce per endpoint, and computes B/A', async () => {
  const log: RecordedRequest[] = [];
  const a = await fixture({ label: 'A', log, behave: () => ({ firstContentDelayMs: 10 }) });
  const b = await fixture({ label: 'B', log, behave: () => ({ firstContentDelayMs: 60 }) });
  const r = await runProbe({ baseUrl: a.url, compareUrl: b.url, model: 'm', trials: 2, cases: ['tiny', 'repeat9k'], scale: 0.05 });
  const order = log.filter((x) => x.method === 'POST').map((x) => x.label).join('');
  assert.equal(order, 'ABAB' + 'AABBAABB');
  const aBodies = a.chatRequests().map((x) => x.body);
  const bBodies = b.chatRequests().map((x) => x.body);
  assert.notEqual(aBodies[2], bBodies[2], 'B does not reuse A’s nonce');

  assert.equal(r.endpoints.length, 2);
  const tiny = r.rows[0];
  assert.deepEqual(tiny.results.map((x) => x.endpoint), ['A', 'B']);
  assert.ok(tiny.compare!.ratio! > 1.5, `ratio ${tiny.compare!.ratio}`);
  assert.ok(tiny.compare!.diffMs! > 30, `diff ${tiny.compare!.diffMs}`);
  assert.equal(a.requestSockets(), 1);
  assert.equal(b.requestSockets(), 1);
});

test('non-2xx trials fail with status and message; the run continues', async () => {
  const f = await fixture({
    behave: (i) =>
      i === 0
        ? { status: 503, errorBody: JSON.stringify({ error: { message: 'no healthy replica', type: 'unavailable' } }) }
        : i === 1
          ? { status: 400, errorBody: '{"detail":"bad model"}' }
          : {},
  });
  const r = await runProbe({ baseUrl: f.url, model: 'm', trials: 3, cases: ['tiny'] });
  const row = r.rows[0].results[0];
  assert.deepEqual([row.ok, row.failed], [1, 2]);
  assert.equal(row.samples[0].status, 503);
  assert.equal(row.samples[0].error, 'HTTP 503: no healthy replica');
  assert.equal(row.samples[1].error, 'HTTP 400: bad model');
  assert.ok(r.ok, 'one good trial is enough');
  assert.equal(f.requestSockets(), 1, 'error bodies were drained, the connection kept');
});

test('error event in the stream and a stream with no content are failed trials', async () => {
  const f = await fixture({ behave: (i) => (i === 0 ? { streamError: 'replica died' } : i === 1 ? { noContent: true } : {}) });
  const r = await runProbe({ baseUrl: f.url, model: 'm', trials: 3, cases: ['tiny'] });
  const row = r.rows[0].results[0];
  assert.equal(row.samples[0].error, 'error event in stream: replica died');
  assert.match(row.samples[1].error!, /stream ended without a content chunk \(2 data events, \[DONE\] seen\)/);
  assert.equal(row.ok, 1);
  assert.equal(f.requestSockets(), 1);
});

test('timeout is a failed trial; the next trial reconnects and is counted', async () => {
  const f = await fixture({ behave: (i) => (i === 0 ? { hang: true } : {}) });
  // The limit applies to the good trial too: long enough for a busy machine to answer it in time.
  const r = await runProbe({ baseUrl: f.url, model: 'm', trials: 2, cases: ['tiny'], timeoutMs: 500 });
  const row = r.rows[0].results[0];
  assert.match(row.samples[0].error!, /timed out after 500 ms/);
  assert.equal(row.ok, 1);
  assert.equal(r.endpoints[0].connections, 2);
});

test('all trials failing makes ok false', async () => {
  const f = await fixture({ behave: () => ({ status: 500 }) });
  const r = await runProbe({ baseUrl: f.url, model: 'm', trials: 2, cases: ['tiny'] });
  assert.equal(r.ok, false);
  assert.equal(r.rows[0].results[0].ttftMs, null);
});

test('connection refused rejects with a ProbeConnectionError', async () => {
  const port = await closedPort();
  await assert.rejects(
    runProbe({ baseUrl: `http://127.0.0.1:${port}`, model: 'm', trials: 1 }),
    (e: Error) => e.name === 'ProbeConnectionError' && /connection refused/.test(e.message),
  );
});
