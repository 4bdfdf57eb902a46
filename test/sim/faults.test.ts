import assert from 'node:assert/strict';
import { request } from 'node:http';
import { test } from 'node:test';
import { waitFor as waitUntil } from '../helpers/wait.js';
import { chat, FAST, postJson, replica, text, user, waitFor } from './helpers.js';

const refused = async (url: string) => {
  const e = await fetch(`${url}/health`).then(
    () => null,
    (err: any) => err,
  );
  return e?.cause?.code === 'ECONNREFUSED';
};

test('crash closes the listener and every socket; recover re-listens on the same port with a cold cache', async (t) => {
  const r = await replica(t, { ...FAST, outputTokens: { min: 500, max: 500 } });
  const messages = user(text(200));
  await chat(r.url, { messages, max_tokens: 1 });
  const inFlight = chat(r.url, { messages: user('a long answer') });
  await waitFor(() => r.counters().generationTokens > 5, 2000, 'streaming');
  r.fault({ kind: 'crash' });
  const broken = await inFlight;
  assert.equal(broken.broken, true);
  assert.equal(broken.done, false);
  assert.ok(await refused(r.url));
  assert.equal(r.counters().aborted, 0, 'a crash is not a client abort');

  r.fault({ kind: 'recover' });
  const health = await fetch(`${r.url}/health`);
  assert.equal(health.status, 200);
  const again = await chat(r.url, { messages, max_tokens: 1 });
  assert.equal(again.usage?.prompt_tokens_details?.cached_tokens, 0, 'a restarted replica has an empty KV cache');
});

test('restart: a new process behind the same listener: cold KV cache, stored Responses gone, counters emptied, new start time', async (t) => {
  const r = await replica(t, FAST);
  const startTime = async () => Number(/^process_start_time_seconds (\S+)$/m.exec(await (await fetch(`${r.url}/metrics`)).text())![1]);
  const messages = user(text(200));
  await chat(r.url, { messages, max_tokens: 1 });
  const stored = await postJson(r.url, '/v1/responses', { input: 'Book me in for Tuesday.' });
  assert.equal(stored.status, 200);
  const follow = { previous_response_id: stored.json.id, input: 'At nine, please.' };
  // Before the restart the id continues the conversation.
  assert.equal((await postJson(r.url, '/v1/responses', follow)).status, 200);
  const before = await startTime();

  r.fault({ kind: 'restart' });
  assert.ok((await startTime()) > before, 'process_start_time_seconds moves on');
  assert.equal(r.counters().prefixCacheQueries, 0, '/metrics counters start over');
  const after = await postJson(r.url, '/v1/responses', follow);
  assert.equal(after.status, 404, 'a response stored before the restart is forgotten');
  assert.deepEqual(after.json, { error: { message: `Response with id '${stored.json.id}' not found.`, type: 'invalid_request_error', param: 'response_id', code: 404 } });
  assert.equal((await fetch(`${r.url}/v1/responses/${stored.json.id}`)).status, 404);
  const again = await chat(r.url, { messages, max_tokens: 1 });
  assert.equal(again.usage?.prompt_tokens_details?.cached_tokens, 0, 'a restarted replica has an empty KV cache');
});

test('crash over the admin endpoint, recovering by itself after recoverAfterMs', async (t) => {
  const r = await replica(t, FAST);
  // Long enough for a busy machine to see the crash before the recovery; the recovery is waited
  // for rather than slept on.
  const t0 = performance.now();
  const res = await postJson(r.url, '/sim/fault', { kind: 'crash', recoverAfterMs: 600 });
  assert.equal(res.status, 200);
  await waitFor(() => r.faults().some((f) => f.kind === 'crash'), 1000, 'crash');
  assert.ok(await refused(r.url));
  const health = () => fetch(`${r.url}/health`).then((x) => x.status, () => 0);
  await waitUntil('listening again', async () => (await health()) === 200, 5_000);
  assert.ok(performance.now() - t0 >= 590, `back after ${performance.now() - t0} ms, before recoverAfterMs`);
  assert.deepEqual(r.faults(), []);
});

test('stall accepts a request but never sends headers; times limits it', async (t) => {
  const r = await replica(t, FAST);
  r.fault({ kind: 'stall', times: 1 });
  const headersIn = await new Promise<boolean>((resolve) => {
    const req = request(`${r.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' } }, () =>
      resolve(true),
    );
    req.on('error', () => {});
    req.end(JSON.stringify({ messages: user('hi'), stream: true }));
    setTimeout(() => {
      req.destroy();
      resolve(false);
    }, 300);
  });
  assert.equal(headersIn, false);
  assert.equal(r.counters().stalled, 1);
  const next = await chat(r.url, { messages: user('hi'), max_tokens: 2 });
  assert.equal(next.status, 200);
  assert.ok(next.done);
});

test('die-mid-stream cuts the socket after N content chunks, without [DONE]', async (t) => {
  const r = await replica(t, { ...FAST, outputTokens: { min: 40, max: 40 } });
  r.fault({ kind: 'die-mid-stream', afterChunks: 3, times: 1 });
  const res = await chat(r.url, { messages: user('hi') });
  assert.equal(res.status, 200);
  assert.equal(res.broken, true);
  assert.equal(res.done, false);
  const contentChunks = (res.chunks as any[]).filter((c) => c.choices[0]?.delta?.content);
  assert.equal(contentChunks.length, 3);
  assert.equal(r.counters().diedMidStream, 1);
  assert.equal(r.counters().running, 0, 'the sequence was freed');
  const next = await chat(r.url, { messages: user('hi') });
  assert.ok(next.done);
});

test('die-mid-stream with afterChunks 0 dies right after the headers', async (t) => {
  const r = await replica(t, FAST);
  r.fault({ kind: 'die-mid-stream', afterChunks: 0, times: 1 });
  const res = await chat(r.url, { messages: user('hi') });
  assert.equal(res.status, 200);
  assert.equal(res.chunks.length, 0);
  assert.equal(res.broken, true);
  assert.equal(r.counters().diedMidStream, 1);
  assert.equal(r.counters().running + r.counters().waiting, 0);
});

test('busy answers 503 for the next N requests', async (t) => {
  const r = await replica(t, FAST);
  await postJson(r.url, '/sim/fault', { kind: 'busy', times: 2 });
  const a = await postJson(r.url, '/v1/chat/completions', { messages: user('hi') });
  const b = await postJson(r.url, '/v1/chat/completions', { messages: user('hi') });
  const c = await postJson(r.url, '/v1/chat/completions', { messages: user('hi'), max_tokens: 1 });
  assert.deepEqual([a.status, b.status, c.status], [503, 503, 200]);
  assert.equal(a.json.error.code, 503);
});

test('slow multiplies step times', async (t) => {
  const r = await replica(t, { ...FAST, frontendMs: 0, stepBaseMs: 40 });
  // The best of two, so one late timer on a busy machine does not decide.
  const ttft = async () => {
    const a = (await chat(r.url, { messages: user('hi'), max_tokens: 1 })).ttftMs!;
    const b = (await chat(r.url, { messages: user('hi'), max_tokens: 1 })).ttftMs!;
    return Math.min(a, b);
  };
  const normal = await ttft();
  r.fault({ kind: 'slow', factor: 3 });
  const slow = await ttft();
  r.clearFaults('slow');
  const back = await ttft();
  assert.ok(normal > 35 && normal < 80, `normal ${normal}`);
  assert.ok(slow > 115 && slow < 200, `slow ${slow}`);
  assert.ok(back < 80, `after clearing ${back}`);
});

test('unhealthy: /health 503 and completions 500 until cleared', async (t) => {
  const r = await replica(t, FAST);
  await postJson(r.url, '/sim/fault', { kind: 'unhealthy' });
  assert.equal((await fetch(`${r.url}/health`)).status, 503);
  assert.equal((await postJson(r.url, '/v1/chat/completions', { messages: user('hi') })).status, 500);
  const del = await fetch(`${r.url}/sim/fault`, { method: 'DELETE' });
  assert.equal(del.status, 200);
  assert.equal((await fetch(`${r.url}/health`)).status, 200);
});

test('admin: /sim/state reports faults and counters; /sim/reset empties cache and counters; bad faults are 400', async (t) => {
  const r = await replica(t, FAST);
  const messages = user(text(100));
  await chat(r.url, { messages, max_tokens: 1 });
  r.fault({ kind: 'slow', factor: 2 });
  const state = await (await fetch(`${r.url}/sim/state`)).json();
  assert.deepEqual(state.faults, [{ kind: 'slow', factor: 2 }]);
  assert.equal(state.counters.requests, 1);
  assert.equal(state.url, r.url);
  assert.equal((await postJson(r.url, '/sim/fault', { kind: 'explode' })).status, 400);
  assert.equal((await postJson(r.url, '/sim/reset', {})).status, 200);
  assert.equal(r.counters().requests, 0);
  assert.equal(r.counters().cachedBlocks, 0);
  const after = await chat(r.url, { messages, max_tokens: 1 });
  assert.equal(after.usage?.prompt_tokens_details?.cached_tokens, 0);
});

test('faults given at start are active at once', async (t) => {
  const r = await replica(t, { ...FAST, faults: [{ kind: 'busy' }] });
  assert.equal((await postJson(r.url, '/v1/chat/completions', { messages: user('hi') })).status, 503);
});
