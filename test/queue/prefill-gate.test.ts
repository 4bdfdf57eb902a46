/**
 * limits.batchPrefillPerReplica: at most K streamed batch requests await their first token on a
 * replica, and none is let in while an interactive request there awaits its own. The limiter's
 * rules, then through a gateway over real sockets: a fixture replica that holds a caller's turn
 * before its first token, and the simulator, whose batch prefills take real engine steps.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { messagesOfTokens, startReplica, type SimReplica } from '../../bench/sim/index.js';
import { createLimiter, type QueuePlace } from '../../src/queue/limiter.js';
import { startFixture, type FixtureUpstream } from '../helpers/fixture-upstream.js';
import { chatBody, startGateway, type TestGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';

const place = (batch: boolean): QueuePlace => ({ batch, deadline: Infinity, budgetMs: 0, expireAtDeadline: false });
const BATCH = place(true);
const VOICE = place(false);
const settled = async (w: Promise<void>) => Promise.race([w.then(() => true), new Promise<boolean>((r) => setImmediate(() => r(false)))]);

describe('the prefill gate (queue/limiter.ts)', () => {
  it('holds batch while an interactive holder awaits its first token, and K batch prefills at once', async () => {
    const l = createLimiter({ max: 0, maxQueued: 8, timeoutMs: 5_000, what: 'test', batchPrefill: 1 });
    assert.equal(l.acquire(VOICE, 'interactive'), null, 'interactive is never gated');
    const b1 = l.acquire(BATCH, 'batch');
    assert.notEqual(b1, null, 'a caller awaits its first token: batch waits');
    assert.equal(await settled(b1!), false);
    l.prefilled('interactive');
    assert.equal(await settled(b1!), true, 'the caller\'s first token lets it in');
    const b2 = l.acquire(BATCH, 'batch')!;
    const unstreamed = l.acquire(BATCH, null);
    assert.equal(unstreamed, null, 'an unstreamed batch request is not counted against K (its first token is seen only at the end)');
    assert.equal(await settled(b2), false, 'one batch prefill at once');
    l.release('batch');
    assert.equal(await settled(b2), true, 'a batch request that ended before its first token frees its place');
    l.prefilled('batch');
    assert.equal(l.acquire(BATCH, 'batch'), null);
  });

  it('holdForInteractive false keeps the bound of K but not the hold for a caller\'s first token', async () => {
    const l = createLimiter({ max: 0, maxQueued: 8, timeoutMs: 5_000, what: 'test', batchPrefill: 1, holdForInteractive: false });
    assert.equal(l.acquire(VOICE, 'interactive'), null);
    assert.equal(l.acquire(BATCH, 'batch'), null, 'a caller awaits its first token, and batch goes in all the same');
    const b2 = l.acquire(BATCH, 'batch')!;
    assert.equal(await settled(b2), false, 'still one batch prefill at once');
    l.prefilled('batch');
    assert.equal(await settled(b2), true);
  });

  it('is off at 0: batch goes in beside a caller\'s prefill', () => {
    const l = createLimiter({ max: 0, maxQueued: 8, timeoutMs: 5_000, what: 'test' });
    assert.equal(l.acquire(VOICE, 'interactive'), null);
    assert.equal(l.acquire(BATCH, 'batch'), null);
    assert.equal(l.acquire(BATCH, 'batch'), null);
  });
});

const metricValue = async (g: TestGateway, re: RegExp) => Number(re.exec(await (await request(`${g.adminUrl}/metrics`)).body.text())?.[1] ?? 0);

describe('the prefill gate through the gateway (a fixture replica)', () => {
  let a: FixtureUpstream;
  let g: TestGateway;
  before(async () => {
    a = await startFixture('a');
    g = await startGateway([a.url], { limits: { batchPrefillPerReplica: 1 } });
  });
  after(async () => { await g.close(); await a.close(); });

  const post = (headers: Record<string, string>, body: string) =>
    request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body }).then(async (r) => ({ status: r.statusCode, text: await r.body.text() }));

  it('a batch request reaches the replica only once the caller\'s turn there has its first token', async () => {
    const seen = (content: string) => a.seen.some((s) => s.body.toString().includes(content));
    const voice = post({ 'x-session-id': 'caller-1', 'x-fixture-hold': 'v1' }, chatBody({ stream: true }, 'caller turn'));
    await waitFor('the caller\'s turn at the replica', () => seen('caller turn'), 5_000);
    const batch = post({ 'x-priority': 'batch' }, chatBody({ stream: true }, 'batch job'));
    await waitFor('the batch request to wait at the gate', async () => (await metricValue(g, /warmroute_batch_prefill_waits_total\{replica="[^"]+"\} (\d+)/)) === 1, 5_000);
    assert.equal(seen('batch job'), false, 'not forwarded while the caller awaits its first token');
    a.release('v1');
    const results = await Promise.all([voice, batch]);
    assert.deepEqual(results.map((r) => r.status), [200, 200]);
    assert.ok(seen('batch job'));
    assert.match(results[1].text, /\[DONE\]/);
  });
});

describe('the prefill gate on the simulator', () => {
  let sim: SimReplica;
  let g: TestGateway;
  before(async () => {
    // A 2,000-token prefill takes about 2 s of engine time: long enough for the others to arrive during it.
    sim = await startReplica({ frontendMs: 0.5, tokenizeMsPerToken: 0, stepBaseMs: 2, prefillMsPerToken: 1, attnMsPerTokenPair: 0, decodeMsPerSeq: 0, decodeMsPerCtxToken: 0, outputTokens: { min: 3, max: 5 }, schedulingPolicy: 'priority' });
    g = await startGateway([sim.url], { limits: { batchPrefillPerReplica: 1 }, priority: { vllm: { enabled: true } } });
  });
  after(async () => { await g.close(); await sim.close(); });

  it('batch prefills go to the replica one at a time, and every job completes', { timeout: 60_000 }, async () => {
    const job = (j: number) => request(`${g.url}/v1/chat/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json', 'x-priority': 'batch' },
      body: JSON.stringify({ model: 'google/gemma-4-31B-it', stream: true, max_tokens: 5, messages: messagesOfTokens(2000, `job ${j}.`) }),
    }).then(async (r) => ({ status: r.statusCode, text: await r.body.text() }));
    const first = job(0);
    await waitFor('the first job at the replica', () => g.gw.registry.replicas[0].inflight === 1, 5_000);
    const rest = [job(1), job(2)];
    await waitFor('both later jobs to wait at the gate', async () => (await metricValue(g, /warmroute_batch_prefill_waits_total\{replica="[^"]+"\} (\d+)/)) === 2, 10_000);
    assert.equal(g.gw.registry.replicas[0].inflight, 1, 'one batch prefill at a time on the replica');
    const results = await Promise.all([first, ...rest]);
    for (const r of results) {
      assert.equal(r.status, 200);
      assert.match(r.text, /\[DONE\]/);
    }
  });
});
