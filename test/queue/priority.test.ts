import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { defaultsOf } from '../../src/config/defaults.js';
import { ConfigSchema } from '../../src/config/schema.js';
import { createLimiter, Shed, type QueuePlace } from '../../src/queue/limiter.js';
import { priorityOf } from '../../src/queue/priority.js';
import { startFixture, type FixtureUpstream } from '../helpers/fixture-upstream.js';
import { chatBody, startGateway, waitForAccess, type TestGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';

const options = defaultsOf(ConfigSchema).priority;
const place = (batch: boolean, deadline = Infinity, expire = false): QueuePlace => ({ batch, deadline, budgetMs: 0, expireAtDeadline: expire });
const limiter = (max: number, extra: Record<string, number> = {}) => createLimiter({ max, maxQueued: 8, timeoutMs: 5_000, what: 'test', ...extra });

describe('priority queues (queue/limiter.ts)', () => {
  it('serves interactive before batch, and by deadline within a class', async () => {
    const l = limiter(1);
    assert.equal(l.acquire(place(true)), null);
    const order: string[] = [];
    const waits = [
      ['batch', l.acquire(place(true))],
      ['late', l.acquire(place(false, performance.now() + 60_000))],
      ['none', l.acquire(place(false))],
      ['soon', l.acquire(place(false, performance.now() + 1_000))],
    ] as const;
    for (const [name, w] of waits) void w!.then(() => { order.push(name); l.release(); });
    l.release();
    await Promise.all(waits.map(([, w]) => w));
    assert.deepEqual(order, ['soon', 'late', 'none', 'batch']);
  });

  it('keeps the reserved slots for interactive requests', () => {
    const l = limiter(4, { reserved: 1 });
    for (let i = 0; i < 3; i++) assert.equal(l.acquire(place(true)), null);
    const batch = l.acquire(place(true));
    assert.notEqual(batch, null, 'the fourth batch request waits');
    assert.equal(l.acquire(place(false)), null, 'an interactive one takes the reserved slot at once');
    l.cancel(batch!);
  });

  it('a full queue sheds its last batch waiter for an interactive arrival; a batch arrival is refused', async () => {
    const l = createLimiter({ max: 1, maxQueued: 1, timeoutMs: 5_000, what: 'test' });
    l.acquire(place(false));
    const batch = l.acquire(place(true))!;
    assert.throws(() => l.acquire(place(true)), (e: unknown) => e instanceof Shed && e.cause === 'queue_full');
    const interactive = l.acquire(place(false))!;
    await assert.rejects(batch, (e: unknown) => e instanceof Shed && e.cause === 'queue_full' && e.error.statusCode === 503 && e.error.headers.includes('retry-after'));
    l.release();
    await interactive;
  });

  it('an interactive request still queued at its deadline is answered then (503 deadline_exceeded), not at the queue timeout', async () => {
    const l = limiter(1);
    l.acquire(place(false));
    const t0 = performance.now();
    const w = l.acquire({ batch: false, deadline: t0 + 50, budgetMs: 50, expireAtDeadline: true })!;
    await assert.rejects(w, (e: unknown) => e instanceof Shed && e.cause === 'deadline' && e.error.openaiCode === 'deadline_exceeded');
    assert.ok(performance.now() - t0 < 5_000);
    assert.equal(l.queued, 0);
  });
});

describe('a request\'s class (queue/priority.ts)', () => {
  const of = (x: Partial<Parameters<typeof priorityOf>[0]>) => priorityOf({ keyClass: null, headers: {}, body: {}, hasSession: false, arrivedAt: 0, options, ...x });
  it('API key, then x-priority, then the body\'s priority, then the default', () => {
    assert.deepEqual([of({ keyClass: 'batch', headers: { 'x-priority': 'interactive' } }).cls, of({ keyClass: 'batch' }).source], ['batch', 'key']);
    assert.equal(of({ headers: { 'x-priority': 'batch' }, body: { priority: -5 } }).cls, 'batch');
    assert.equal(of({ headers: { 'x-priority': '7' } }).cls, 'batch');
    assert.equal(of({ body: { priority: 3 } }).cls, 'batch');
    assert.equal(of({ body: { priority: 0 } }).cls, 'interactive');
    assert.equal(of({ hasSession: true, options: { ...options, sessionDefault: 'interactive', keylessDefault: 'batch' } }).cls, 'interactive');
    assert.equal(of({ options: { ...options, keylessDefault: 'batch' } }).cls, 'batch');
  });
  it('x-slo-ttft-ms sets the deadline; bad headers are a 400', () => {
    assert.equal(of({ headers: { 'x-slo-ttft-ms': '300' }, arrivedAt: 1000 }).deadline, 1300);
    assert.equal(of({}).deadline, Infinity);
    for (const headers of [{ 'x-priority': 'urgent' }, { 'x-slo-ttft-ms': '-1' }, { 'x-slo-ttft-ms': 'soon' }]) {
      assert.throws(() => of({ headers }), (e: { statusCode?: number }) => e.statusCode === 400);
    }
  });
  it('reaches vLLM only when enabled and the client set no priority; an integer header as is', () => {
    const on = { ...options, vllm: { enabled: true, interactive: 0, batch: 10 } };
    assert.equal(of({ headers: { 'x-priority': 'batch' } }).inject, null, 'off by default');
    assert.equal(of({ headers: { 'x-priority': 'batch' }, options: on }).inject, 10);
    assert.equal(of({ headers: { 'x-priority': '42' }, options: on }).inject, 42);
    assert.equal(of({ headers: { 'x-priority': 'batch' }, body: { priority: 1 }, options: on }).inject, null);
  });
});

describe('priority classes through the gateway', () => {
  let a: FixtureUpstream;
  let g: TestGateway;
  before(async () => {
    a = await startFixture('a');
    g = await startGateway([a.url], { limits: { maxInflightPerReplica: 1 }, priority: { vllm: { enabled: true } } });
  });
  after(async () => { await g.close(); await a.close(); });

  const post = (headers: Record<string, string>, body = chatBody()) =>
    request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body }).then(async (r) => ({ status: r.statusCode, text: await r.body.text() }));

  it('queued behind a held stream, interactive goes before batch that arrived first; the class reaches vLLM and the access line', async () => {
    const holder = post({ 'x-fixture-hold': 'h1', 'x-priority': 'interactive' });
    await waitFor('the held stream to take the slot', () => g.gw.registry.replicas[0].inflight === 1, 5_000);
    const from = a.seen.length;
    const batch = post({ 'x-priority': 'batch' }, chatBody({}, 'batch job'));
    const queued = async (n: number) => new RegExp(`warmroute_queued\\{replica="[^"]+"\\} ${n}\\b`).test(await (await request(`${g.adminUrl}/metrics`)).body.text());
    await waitFor('the batch request to queue', () => queued(1), 5_000);
    const voice = post({ 'x-session-id': 'caller-1' }, chatBody({}, 'caller turn'));
    await waitFor('both to queue', () => queued(2), 5_000);
    a.release('h1');
    const results = await Promise.all([holder, batch, voice]);
    assert.deepEqual(results.map((r) => r.status), [200, 200, 200]);
    const forwarded = a.seen.slice(from).filter((s) => s.url.endsWith('/completions')).map((s) => JSON.parse(s.body.toString()) as { priority?: number; messages: { content: string }[] }).filter((b) => b.messages.at(-1)!.content !== 'Hello there');
    assert.deepEqual(forwarded.map((b) => b.messages.at(-1)!.content), ['caller turn', 'batch job'], 'the caller first');
    assert.deepEqual(forwarded.map((b) => b.priority), [0, 10]);
    const lines = await waitForAccess(g, (ls) => ls.length >= 3);
    assert.deepEqual(new Set(lines.map((l) => l.priority)), new Set(['interactive', 'batch']));
    const metrics = await (await request(`${g.adminUrl}/metrics`)).body.text();
    assert.match(metrics, /warmroute_class_requests_total\{class="batch",code="2xx"\} 1/);
    assert.match(metrics, /warmroute_class_requests_total\{class="interactive",code="2xx"\} 2/);
  });

  it('a client\'s own priority is forwarded byte for byte', async () => {
    const from = a.seen.length;
    const body = `{ "model": "fixture-model", "priority": 3, "messages": [ {"role": "user", "content": "hi"} ] }`;
    assert.equal((await post({ 'x-priority': 'batch' }, body)).status, 200);
    assert.equal(a.seen.slice(from).find((s) => s.url.endsWith('/completions'))!.body.toString(), body);
  });
});
