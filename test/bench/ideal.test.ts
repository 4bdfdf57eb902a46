import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startReplica } from '../../bench/sim/index.js';
import { createPrefixCacheModel, generatedIds, idealHits, promptIds, type SentRequest } from '../../bench/voice/ideal.js';
import { runStrategy } from '../../bench/voice/run.js';
import { buildWorkload } from '../../bench/voice/workload.js';
import { FAST } from '../sim/helpers.js';

const seq = (n: number, from = 1000) => Array.from({ length: n }, (_, i) => from + i);

test('prefix cache model: full blocks only, longest run from the start, last prompt token always computed', () => {
  const m = createPrefixCacheModel(16);
  const a = seq(40);
  assert.equal(m.hit(a), 0);
  m.add(a, 40); // blocks [0,16) and [16,32); the 8-token tail is not a full block
  assert.equal(m.hit(seq(50)), 32);
  assert.equal(m.hit(a), 32); // cap floor(39/16) = 2 blocks
  assert.equal(m.hit(seq(32)), 16); // cap floor(31/16) = 1 block: the last token is recomputed
  assert.equal(m.hit(seq(33)), 32);
  const diverged = seq(50);
  diverged[20] = 7;
  assert.equal(m.hit(diverged), 16); // block 1 differs
  const changedFirst = seq(50);
  changedFirst[0] = 7;
  assert.equal(m.hit(changedFirst), 0); // chained: a different first block means nothing matches after it
});

const SYSTEM = 'You are a phone agent. Keep it short. '.repeat(20);
const msg = (role: 'system' | 'user' | 'assistant', content: string) => ({ role, content });
const lcp = (a: number[], b: number[]) => {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
};

test('ideal replay on a hand-checked transcript: own history, then another session of the group', () => {
  const a0 = [msg('system', SYSTEM), msg('user', 'I want a table for two')];
  const a1 = [...a0, msg('assistant', ' Sure, for when?'), msg('user', 'seven tonight')];
  const b0 = [msg('system', SYSTEM), msg('user', 'cancel my booking please')];
  const reqs: SentRequest[] = [
    { sentAt: 1, messages: a0, tools: [], content: ' Sure, for when?', toolCall: null, finishReason: 'stop' },
    { sentAt: 3, messages: a1, tools: [], content: ' Done.', toolCall: null, finishReason: 'stop' },
    { sentAt: 2, messages: b0, tools: [], content: ' Which one?', toolCall: null, finishReason: 'stop' },
  ];
  const r = idealHits(reqs);
  const [p0, p1, q0] = [promptIds(a0, []), promptIds(a1, []), promptIds(b0, [])];
  const g0 = generatedIds(' Sure, for when?', null, 'stop');
  assert.equal(g0.length, 5); // four 4-char pieces + end of turn
  assert.equal(r.cached[0], 0);
  // B shares the system turn and "<start_of_turn>user\n" with A: whole blocks of that.
  assert.equal(r.cached[2], Math.floor(lcp(p0, q0) / 16) * 16);
  assert.ok(r.cached[2] > 0);
  // A's second turn hits its first prompt and answer (bar the last generated token), block-aligned.
  assert.deepEqual(p1.slice(0, p0.length + g0.length), [...p0, ...g0]);
  assert.equal(r.cached[1], Math.floor(Math.min(p0.length + g0.length - 1, p1.length - 1) / 16) * 16);
  assert.equal(r.hitRate, (r.cached[0] + r.cached[1] + r.cached[2]) / (p0.length + p1.length + q0.length));
});

test('the ideal model predicts exactly what a dedicated simulated replica reports, tool turns included', async () => {
  const replica = await startReplica({ outputTokens: { min: 30, max: 90 } });
  try {
    const workload = buildWorkload({ sessions: 1, turns: 6, toolTurnShare: 0.6, thinkMs: [0, 0], startSpreadMs: 0, systemTokens: [600, 900], seed: 3 });
    const run = await runStrategy({ url: replica.url, strategy: 'direct', workload, maxDurationMs: 20_000, requestTimeoutMs: 10_000 });
    assert.ok(run.records.every((r) => r.ok), JSON.stringify(run.records.map((r) => r.error)));
    assert.ok(run.records.some((r) => r.toolCall), 'the plan has tool turns');
    const ideal = idealHits(run.sent);
    run.records.forEach((r, i) => {
      assert.equal(ideal.prompt[i], r.promptTokens, `prompt tokens of request ${i}`);
      assert.equal(ideal.cached[i], r.cachedTokens, `cached tokens of request ${i}`);
      const s = run.sent[i];
      assert.equal(generatedIds(s.content, s.toolCall, s.finishReason).length, r.completionTokens, `generated tokens of request ${i}`);
    });
    assert.ok(ideal.hitRate > 0.5);
  } finally {
    await replica.close();
  }
});

test('over the Responses API too: the replica renders what the client mirrors, keyed (previous_response_id) and keyless (history resent), tool turns included', async () => {
  // Timing does not change what is cached: the fast knobs keep this test short.
  const replica = await startReplica({ ...FAST, outputTokens: { min: 30, max: 90 } });
  try {
    // Session 0 keyed (header), session 1 keyless: both dialogue shapes, one replica each in turn.
    const workload = buildWorkload({ sessions: 2, turns: 6, toolTurnShare: 0.6, keylessShare: 0.5, bodyKeyShare: 0, thinkMs: [0, 0], startSpreadMs: 0, systemTokens: [600, 900], seed: 3 });
    assert.deepEqual(workload.sessions.map((s) => s.keyMode).sort(), ['header', 'none']);
    for (const session of workload.sessions) {
      const one = { ...workload, sessions: [{ ...session, index: 0 }] };
      const run = await runStrategy({ url: replica.url, strategy: 'direct', api: 'responses', workload: one, maxDurationMs: 20_000, requestTimeoutMs: 10_000 });
      assert.ok(run.records.every((r) => r.ok), JSON.stringify(run.records.map((r) => r.error)));
      assert.ok(run.records.some((r) => r.toolCall), 'the plan has tool turns');
      const ideal = idealHits(run.sent);
      run.records.forEach((r, i) => {
        assert.equal(ideal.prompt[i], r.promptTokens, `${session.keyMode}: prompt tokens of request ${i}`);
        assert.equal(ideal.cached[i], r.cachedTokens, `${session.keyMode}: cached tokens of request ${i}`);
      });
      replica.reset();
    }
  } finally {
    await replica.close();
  }
});
