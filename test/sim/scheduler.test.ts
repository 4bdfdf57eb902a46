import assert from 'node:assert/strict';
import { request } from 'node:http';
import { test } from 'node:test';
import { chat, FAST, postJson, replica, sleep, text, user, waitFor } from './helpers.js';

const gauge = (metrics: string, name: string) => Number(new RegExp(`^${name}\\{[^}]*\\} (\\S+)$`, 'm').exec(metrics)?.[1]);

test('max_num_seqs caps the running batch; the rest wait in FIFO order', async (t) => {
  const r = await replica(t, { ...FAST, maxNumSeqs: 2, outputTokens: { min: 30, max: 30 } });
  // Slowed while the queue is looked at: the first two must still be running when the last two
  // arrive, however long a busy machine takes to send them. Each is sent once the one before has
  // arrived, so the FIFO order is the order sent (requests a few ms apart can arrive swapped).
  r.fault({ kind: 'slow', factor: 20 });
  const starts: number[] = [];
  const runs: Promise<unknown>[] = [];
  for (let i = 0; i < 4; i++) {
    const t0 = performance.now();
    runs.push(chat(r.url, { messages: user(`request ${i}`) }).then((res) => { starts[i] = t0 + res.ttftMs!; }));
    await waitFor(() => r.counters().requests === i + 1, 2000, `request ${i} in`);
  }
  // A request is admitted at a step boundary: the second may wait a (slowed) step for its seat.
  await waitFor(() => r.counters().running === 2 && r.counters().waiting === 2, 2000, 'two running, two waiting');
  const metrics = await (await fetch(`${r.url}/metrics`)).text();
  assert.equal(gauge(metrics, 'vllm:num_requests_running'), 2);
  assert.equal(gauge(metrics, 'vllm:num_requests_waiting'), 2);
  r.clearFaults('slow');
  await Promise.all(runs);
  // The two that waited got their first token after the first two were done (30 steps later).
  assert.ok(starts[2] > starts[0] + 40 && starts[3] > starts[1] + 40);
  assert.ok(starts[2] <= starts[3]);
});

test('a full waiting queue answers 503 in vLLM error shape', async (t) => {
  const r = await replica(t, { ...FAST, maxNumSeqs: 1, maxWaiting: 1, outputTokens: { min: 40, max: 40 } });
  // Slowed until the third is answered: the first must still hold its seat (and the second the
  // queue) by then, however long a busy machine takes to send them.
  r.fault({ kind: 'slow', factor: 20 });
  const first = chat(r.url, { messages: user('one') });
  await waitFor(() => r.counters().running === 1, 2000, 'first running');
  const second = chat(r.url, { messages: user('two') });
  await waitFor(() => r.counters().waiting === 1, 2000, 'second waiting');
  const third = await postJson(r.url, '/v1/chat/completions', { messages: user('three') });
  r.clearFaults('slow');
  assert.equal(third.status, 503);
  assert.deepEqual(Object.keys(third.json.error).sort(), ['code', 'message', 'param', 'type']);
  assert.equal(third.json.error.code, 503);
  assert.equal(third.json.error.type, 'ServiceUnavailableError');
  assert.equal((await first).status, 200);
  assert.equal((await second).status, 200);
  assert.equal(r.counters().rejected, 1);
});

test('a client disconnect aborts the sequence, frees its seat, and is counted with its time', async (t) => {
  const r = await replica(t, { ...FAST, maxNumSeqs: 1, outputTokens: { min: 2000, max: 2000 } });
  let abortedAt = 0;
  await new Promise<void>((resolve) => {
    const req = request(`${r.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
      res.once('data', () => {
        abortedAt = Date.now();
        req.destroy();
        resolve();
      });
    });
    req.on('error', () => {});
    req.end(JSON.stringify({ stream: true, messages: user('long answer please') }));
  });
  // The seat is free again: the next request is served at once, not after the ~4 s the 2000 tokens
  // would take. (Bounds well under that: a busy machine is slow, not wrong.)
  const next = await chat(r.url, { messages: user('next'), max_tokens: 2 });
  assert.ok(next.ttftMs! < 1_000, `TTFT ${next.ttftMs}`);
  const c = r.counters();
  assert.equal(c.aborted, 1);
  assert.equal(c.aborts[0].phase, 'running');
  assert.ok(c.aborts[0].generated > 0 && c.aborts[0].generated < 2000);
  assert.ok(c.lastAbortAt! >= abortedAt && c.lastAbortAt! - abortedAt < 1_000, `abort counted ${c.lastAbortAt! - abortedAt} ms after the client left`);
  const metrics = await (await fetch(`${r.url}/metrics`)).text();
  assert.match(metrics, /vllm:request_success_total\{engine="0",finished_reason="abort",model_name="[^"]+"\} 1\.0/);
});

test('a request aborted while still queued never runs', async (t) => {
  const r = await replica(t, { ...FAST, maxNumSeqs: 1, outputTokens: { min: 100, max: 100 } });
  // Slowed until the abort has been seen: the first must still hold the seat by then, or the
  // queued one would be admitted before its client's going away reached the replica.
  r.fault({ kind: 'slow', factor: 20 });
  const first = chat(r.url, { messages: user('first') });
  await waitFor(() => r.counters().running === 1, 2000, 'first running');
  const ac = new AbortController();
  const queued = fetch(`${r.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages: user('queued') }),
    signal: ac.signal,
  }).catch(() => null);
  await waitFor(() => r.counters().waiting === 1, 2000, 'one waiting');
  ac.abort();
  await queued;
  // The client's side settles at once; the replica sees the socket close a moment later.
  await waitFor(() => r.counters().aborted === 1, 2000, 'the abort');
  assert.equal(r.counters().waiting, 0);
  assert.equal(r.counters().running, 1, 'the first still holds the seat');
  r.clearFaults('slow');
  await first;
  const c = r.counters();
  assert.equal(c.aborts[0].phase, 'waiting');
  assert.equal(c.promptTokens, (await first).usage!.prompt_tokens, 'the queued request was never prefilled');
});

test('decode steps slow down as the batch grows', async (t) => {
  const r = await replica(t, { ...FAST, stepBaseMs: 5, decodeMsPerSeq: 1, outputTokens: { min: 30, max: 30 } });
  const perToken = async (n: number) => {
    const rs = await Promise.all(Array.from({ length: n }, (_, i) => chat(r.url, { messages: user(`q${n}-${i}`) })));
    return rs.reduce((s, x) => s + (x.totalMs - x.ttftMs!) / 29, 0) / n;
  };
  const one = await perToken(1);
  const twenty = await perToken(20);
  // 5 + 1×n ms per step: about 6 ms alone, about 25 ms with 20 in the batch.
  assert.ok(one > 4 && one < 12, `alone ${one}`);
  assert.ok(twenty > 18 && twenty < 40, `batch of 20 ${twenty}`);
});

test('chunked prefill: a long prompt is split by the token budget while decodes keep going', async (t) => {
  // Chunks of ~27 ms against an unchunked stall of ~400 ms: far enough apart that a busy machine's
  // pauses, added to a gap, cannot make one pass for the other.
  const r = await replica(t, {
    ...FAST,
    stepBaseMs: 2,
    prefillMsPerToken: 0.1,
    maxNumBatchedTokens: 256,
    outputTokens: { min: 300, max: 300 },
  });
  const t0 = performance.now();
  const streaming = chat(r.url, { messages: user('keep talking') });
  await waitFor(() => r.counters().generationTokens > 5, 2000, 'decoding');
  const t1 = performance.now() - t0;
  const long = await chat(r.url, { messages: user(text(4000)), max_tokens: 1 });
  const t2 = t1 + long.ttftMs!;
  const s = await streaming;
  // 4009 tokens at 0.1 ms each take ~400 ms of prefill, in chunks of ≤255 beside the decode.
  assert.ok(long.ttftMs! > 400, `long prompt TTFT ${long.ttftMs}`);
  const during = s.chunkTimes.filter((x) => x > t1 && x < t2);
  assert.ok(during.length >= 12, `${during.length} decode tokens during the prefill`);
  const gaps = during.slice(1).map((x, i) => x - during[i]);
  // Unchunked, the decode stream would stall for the whole ~400 ms prefill step.
  assert.ok(Math.max(...gaps) < 150, `longest decode gap ${Math.max(...gaps)} ms`);
});

test('an idle replica keeps no timers', async (t) => {
  const r = await replica(t, FAST);
  const timers = () => process.getActiveResourcesInfo().filter((x) => x === 'Timeout').length;
  const before = timers();
  await Promise.all([0, 1, 2].map((i) => chat(r.url, { messages: user(`idle ${i}`), max_tokens: 5 })));
  await sleep(5);
  assert.equal(timers(), before);
});

test('--long-prefill-token-threshold: long prompts are prefilled a chunk a step, and a short request admitted meanwhile is answered first', async (t) => {
  // A 192-token budget: without the threshold, the running long prompts take all of it each step.
  const r = await replica(t, { ...FAST, maxNumBatchedTokens: 192, longPrefillTokenThreshold: 64, outputTokens: { min: 3, max: 3 } });
  // Slowed so the long prompts' chunks outlast the short request's arrival on a busy machine.
  r.fault({ kind: 'slow', factor: 20 });
  const firsts: string[] = [];
  // Two of them: as in vLLM, a request alone in the engine is not cut to the threshold (nobody needs the budget).
  const longs = [0, 1].map((i) => chat(r.url, { messages: user(`long ${i} `.repeat(200)) }).then((res) => { firsts.push('long'); return res; }));
  await waitFor(() => r.counters().running === 2, 2000, 'the long prompts running');
  const short = chat(r.url, { messages: user('short') }).then((res) => { firsts.push('short'); return res; });
  const results = await Promise.all([...longs, short]);
  r.clearFaults('slow');
  for (const res of results) assert.equal(res.status, 200);
  assert.deepEqual(firsts, ['short', 'long', 'long'], 'the short request did not wait for the whole long prefills');
});
