// Caller turns (record/turns.ts) on real sockets: a gateway in front of simulated vLLM replicas,
// driven the way orchestrated voice agents drive it (classification and extraction calls, tool
// loops, keyless conversations, Responses API chains, callers that vanish).

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startFleet, type SimFleet } from '../../bench/sim/index.js';
import { DEFAULT_MODEL } from '../../bench/sim/config.js';
import { startGateway, waitForAccess, type TestGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';
import { FAST } from '../sim/helpers.js';

type Msg = Record<string, unknown>;

/** One streamed call: when it was sent and when its first content arrived (client clock, ms). */
async function call(g: TestGateway, path: string, body: Msg, key: string | null, opts: { abortAfterFirst?: boolean } = {}) {
  const ac = new AbortController();
  const sent = performance.now();
  const res = await fetch(`${g.url}${path}`, {
    method: 'POST', signal: ac.signal,
    headers: { 'content-type': 'application/json', ...(key === null ? {} : { 'x-session-id': key }) },
    body: JSON.stringify({ model: DEFAULT_MODEL, stream: true, ...body }),
  });
  assert.equal(res.status, 200, await (res.status === 200 ? Promise.resolve('') : res.text()));
  let first: number | null = null;
  let text = '';
  let responseId: string | null = null;
  const decoder = new TextDecoder();
  const reader = res.body!.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    const s = decoder.decode(value, { stream: true });
    text += s;
    if (first === null && /"(content|delta)":"[^"]/.test(s)) first = performance.now();
    if (opts.abortAfterFirst && first !== null) { ac.abort(); break; }
  }
  const m = /"id":"(resp_[^"]+)"/.exec(text);
  if (m) responseId = m[1];
  return { sent, first, responseId };
}

const chat = (g: TestGateway, messages: Msg[], key: string | null, max = 4) => call(g, '/v1/chat/completions', { messages, max_tokens: max }, key);

async function sessionView(g: TestGateway, key: string): Promise<any> {
  const res = await fetch(`${g.adminUrl}/admin/sessions/${encodeURIComponent(key)}`);
  return res.json();
}

async function metrics(g: TestGateway): Promise<string> {
  return (await fetch(`${g.adminUrl}/metrics`)).text();
}

const metricValue = (text: string, series: string): number => {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? NaN : Number(line.slice(series.length + 1));
};

const SYSTEM = { role: 'system', content: 'You are the booking line of a public clinic. Keep answers short.' };
const CLASSIFY = { role: 'system', content: 'Classify the caller\'s intent: book, cancel, ask, other. Answer with one word.' };
const EXTRACT = { role: 'system', content: 'Extract the place and the time the caller names, as JSON.' };

describe('caller turns: calls per turn, the caller\'s wait, the LLM time in it', () => {
  let fleet: SimFleet;
  let g: TestGateway;
  before(async () => {
    fleet = await startFleet({ replicas: 2, ...FAST });
    g = await startGateway(fleet.urls, { turns: { idleMs: 400, budgetMs: 250 } });
  });
  after(async () => { await g.close(); await fleet.close(); });

  it('a 3-call turn (classification, extraction, answer) is one turn of 3 calls; the next utterance starts turn 1', async () => {
    const key = 'orchestrated-1';
    const u1 = { role: 'user', content: 'I need to see a doctor in Mapo tomorrow at ten' };
    const t0 = performance.now();
    await chat(g, [CLASSIFY, u1], key);
    await chat(g, [EXTRACT, u1], key);
    const answer = await chat(g, [SYSTEM, u1], key, 8);
    const clientWait = answer.first! - t0;
    await chat(g, [SYSTEM, u1, { role: 'assistant', content: 'Booked.' }, { role: 'user', content: 'Thanks, bye' }], key);
    const view = await sessionView(g, key);
    assert.equal(view.turns.last.length, 1, JSON.stringify(view.turns));
    const [turn] = view.turns.last;
    assert.deepEqual([turn.index, turn.calls, turn.sequential, turn.overlapped, turn.closedBy], [0, 3, 3, 0, 'next']);
    assert.deepEqual(view.turns.open, { index: 1, calls: 1 });
    // The wait runs from the first call's arrival to the answer's first token: more than the
    // answer's own TTFT, no more than what the client saw from its first send.
    const lines = (await waitForAccess(g, (ls) => ls.filter((l) => l.session !== undefined && l.turn !== undefined).length >= 4)).slice(-4);
    assert.deepEqual(lines.map((l) => [l.turn, l.call]), [[0, 0], [0, 1], [0, 2], [1, 0]]);
    assert.ok(turn.waitMs > lines[2].ttftMs, `${turn.waitMs} ms wait > the answer's ${lines[2].ttftMs} ms TTFT`);
    assert.ok(turn.waitMs <= clientWait + 1, `${turn.waitMs} ms wait <= ${clientWait} ms seen by the client`);
    assert.ok(turn.llmMs > 0 && turn.llmMs < turn.waitMs + 1000);
    // DELETE forgets the session, its turns with its pin.
    assert.equal((await fetch(`${g.adminUrl}/admin/sessions/${key}`, { method: 'DELETE' })).status, 200);
    // (Its calls' different system prompts were recorded as prompt drift: that stays, the turns go.)
    assert.equal((await sessionView(g, key)).turns, null);
  });

  it('calls sent at once count as overlapped', async () => {
    const key = 'parallel-1';
    const u = { role: 'user', content: 'Is the Gangnam branch open on Sunday' };
    await Promise.all([chat(g, [CLASSIFY, u], key, 16), chat(g, [EXTRACT, u], key, 16)]);
    await chat(g, [SYSTEM, u], key);
    await chat(g, [SYSTEM, u, { role: 'assistant', content: 'No.' }, { role: 'user', content: 'OK' }], key);
    const [turn] = (await sessionView(g, key)).turns.last;
    assert.equal(turn.calls, 3);
    assert.equal(turn.overlapped, 2, JSON.stringify(turn));
    assert.equal(turn.sequential, 1);
  });

  it('a tool loop (assistant tool call → tool result → assistant again) stays in one turn', async () => {
    const key = 'tool-loop-1';
    const u = { role: 'user', content: 'Book me the first free slot on Monday' };
    const toolCall = (id: string) => ({ role: 'assistant', content: null, tool_calls: [{ id, type: 'function', function: { name: 'find_slot', arguments: '{"day":"monday"}' } }] });
    const result = (id: string) => ({ role: 'tool', tool_call_id: id, content: '{"slot":"09:30"}' });
    const history: Msg[] = [SYSTEM, u];
    await chat(g, history, key);
    history.push(toolCall('c1'), result('c1'));
    await chat(g, history, key);
    history.push(toolCall('c2'), result('c2'));
    await chat(g, history, key);
    history.push({ role: 'assistant', content: 'Monday at 9:30 is yours.' }, { role: 'user', content: 'Great' });
    await chat(g, history, key);
    const view = await sessionView(g, key);
    assert.deepEqual(view.turns.last.map((t: any) => [t.index, t.calls]), [[0, 3]]);
    assert.equal(view.turns.open.index, 1);
  });

  it('a keyless session\'s turns are found by its prefix chain, and the same words said twice are two turns', async () => {
    const sys = { role: 'system', content: 'You are a keyless intake agent for the parking office.' };
    const u1 = { role: 'user', content: 'My car was towed from Yeouido' };
    const a1 = { role: 'assistant', content: 'Which day?' };
    const yes = { role: 'user', content: 'yes' };
    const before = (await waitForAccess(g, () => true)).length;
    await chat(g, [sys, u1], null);
    await chat(g, [sys, u1, a1, yes], null);
    await chat(g, [sys, u1, a1, yes, { role: 'assistant', content: 'Today?' }, yes], null);
    await chat(g, [sys, u1, a1, yes, { role: 'assistant', content: 'Today?' }, yes, { role: 'assistant', content: 'Done.' }, { role: 'user', content: 'bye' }], null);
    const lines = (await waitForAccess(g, (ls) => ls.length >= before + 4)).slice(before);
    assert.deepEqual(lines.map((l) => [l.session ?? null, l.turn, l.call]), [[null, 0, 0], [null, 1, 0], [null, 2, 0], [null, 3, 0]]);
  });

  it('a Responses API chain\'s turns are found through previous_response_id; a function_call_output carries on its turn', async () => {
    const before = (await waitForAccess(g, () => true)).length;
    const instructions = 'You are the keyless Responses API line of the tax office.';
    const r0 = await call(g, '/v1/responses', { instructions, input: 'When is the filing deadline', store: true, max_output_tokens: 4 }, null);
    assert.ok(r0.responseId);
    const r1 = await call(g, '/v1/responses', { instructions, previous_response_id: r0.responseId, input: 'And for companies', store: true, max_output_tokens: 4 }, null);
    const r2 = await call(g, '/v1/responses', {
      instructions, previous_response_id: r1.responseId, store: true, max_output_tokens: 4,
      input: [{ type: 'function_call_output', call_id: 'call_1', output: '{"deadline":"March 31"}' }],
    }, null);
    await call(g, '/v1/responses', { instructions, previous_response_id: r2.responseId, input: 'Thank you', store: true, max_output_tokens: 4 }, null);
    const lines = (await waitForAccess(g, (ls) => ls.length >= before + 4)).slice(before);
    assert.deepEqual(lines.map((l) => [l.status, l.turn, l.call]), [[200, 0, 0], [200, 1, 0], [200, 1, 1], [200, 2, 0]]);
  });

  it('a turn left open by a vanished caller is closed by the idle bound (turns.idleMs), and the metrics carry it', async () => {
    const key = 'vanished-1';
    const idleBefore = metricValue(await metrics(g), 'warmroute_turns_total{closed="idle"}');
    const u = { role: 'user', content: 'Hello, is anyone there' };
    await chat(g, [CLASSIFY, u], key);
    // The caller hangs up in the middle of the answer.
    await call(g, '/v1/chat/completions', { messages: [SYSTEM, u], max_tokens: 200 }, key, { abortAfterFirst: true });
    await waitFor('the idle bound to close the turn', async () => (await sessionView(g, key)).turns.last.length === 1, 5_000);
    const view = await sessionView(g, key);
    assert.equal(view.turns.open, null);
    assert.deepEqual([view.turns.last[0].calls, view.turns.last[0].closedBy], [2, 'idle']);
    assert.ok(view.turns.last[0].waitMs > 0);
    const m = await metrics(g);
    // (Earlier tests' last turns go idle too.)
    assert.ok(metricValue(m, 'warmroute_turns_total{closed="idle"}') >= idleBefore + 1);
    for (const series of ['warmroute_turn_calls_count', 'warmroute_turn_wait_seconds_count', 'warmroute_turn_llm_seconds_count']) {
      assert.ok(metricValue(m, series) >= 5, `${series}: ${metricValue(m, series)}`);
    }
    assert.ok(metricValue(m, 'warmroute_turn_calls_sum') >= 3 + 3 + 3 + 2, 'calls per turn summed');
    assert.match(m, /warmroute_turn_wait_seconds_bucket\{le="0.25"\} \d+/);
    assert.ok(Number.isFinite(metricValue(m, 'warmroute_turns_over_budget_total')));
  });
});

describe('caller turns: the budget and the off switch', () => {
  let fleet: SimFleet;
  before(async () => { fleet = await startFleet({ replicas: 1, ...FAST, stepBaseMs: 5 }); });
  after(async () => { await fleet.close(); });

  it('a turn slower than turns.budgetMs is counted over budget', async () => {
    const g = await startGateway(fleet.urls, { turns: { budgetMs: 1, idleMs: 200 } });
    try {
      const u = { role: 'user', content: 'What are your hours' };
      await chat(g, [CLASSIFY, u], 'budget-1');
      await chat(g, [SYSTEM, u], 'budget-1');
      await waitFor('the turn to close', async () => metricValue(await metrics(g), 'warmroute_turns_over_budget_total') === 1, 5_000);
      const [turn] = (await sessionView(g, 'budget-1')).turns.last;
      assert.equal(turn.overBudget, true);
    } finally {
      await g.close();
    }
  });

  it('turns.enabled false: no turn in the access line, none counted', async () => {
    const g = await startGateway(fleet.urls, { turns: { enabled: false, idleMs: 100 } });
    try {
      await chat(g, [SYSTEM, { role: 'user', content: 'hi' }], 'off-1');
      const [line] = await waitForAccess(g, (ls) => ls.length >= 1);
      assert.equal(line.turn, undefined);
      assert.equal(metricValue(await metrics(g), 'warmroute_turn_calls_count'), 0);
    } finally {
      await g.close();
    }
  });
});
