import assert from 'node:assert/strict';
import { test } from 'node:test';
import { chat, FAST, postJson, replica, user, waitFor } from './helpers.js';

test('--scheduling-policy priority: a waiting request with a lower priority value is admitted first', async (t) => {
  const r = await replica(t, { ...FAST, maxNumSeqs: 1, schedulingPolicy: 'priority', outputTokens: { min: 30, max: 30 } });
  // Slowed while the queue fills, so the first still holds the only seat when the others arrive.
  r.fault({ kind: 'slow', factor: 20 });
  const firstTokenAt: Record<string, number> = {};
  const send = (name: string, priority: number) => {
    const t0 = performance.now();
    return chat(r.url, { messages: user(name), priority }).then((res) => { firstTokenAt[name] = t0 + res.ttftMs!; });
  };
  const runs = [send('holder', 0)];
  await waitFor(() => r.counters().running === 1, 2000, 'the holder running');
  runs.push(send('batch', 10));
  await waitFor(() => r.counters().waiting === 1, 2000, 'the batch request waiting');
  runs.push(send('caller', 0));
  await waitFor(() => r.counters().waiting === 2, 2000, 'both waiting');
  r.clearFaults('slow');
  await Promise.all(runs);
  assert.ok(firstTokenAt.caller < firstTokenAt.batch, `the caller (${firstTokenAt.caller}) before the batch job (${firstTokenAt.batch}) that arrived first`);
});

test('fcfs (the default) refuses a priority other than 0, as vLLM does', async (t) => {
  const r = await replica(t, FAST);
  const res = await postJson(r.url, '/v1/chat/completions', { messages: user('hi'), priority: 5, max_tokens: 2 });
  assert.equal(res.status, 400);
  assert.match(res.text, /Priority scheduling is not enabled/);
  const ok = await postJson(r.url, '/v1/chat/completions', { messages: user('hi'), priority: 0, max_tokens: 2 });
  assert.equal(ok.status, 200);
});
