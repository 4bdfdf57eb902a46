// Caller turns across gateways: the calls of one caller turn, served by two gateways on one Redis,
// are one turn, counted once (by the gateway that opened it), with every call and the caller's wait.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startFleet, type SimFleet } from '../../bench/sim/index.js';
import { DEFAULT_MODEL } from '../../bench/sim/config.js';
import { accessLines, startGateway, waitForAccess, type TestGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';
import { FAST } from '../sim/helpers.js';
import { startRedis, type RedisChild } from './redis-server.js';

type Msg = { role: string; content: string };

async function chat(g: TestGateway, messages: Msg[], key: string | null): Promise<void> {
  const res = await fetch(`${g.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key === null ? {} : { 'x-session-id': key }) },
    body: JSON.stringify({ model: DEFAULT_MODEL, stream: true, messages, max_tokens: 4 }),
  });
  assert.equal(res.status, 200);
  await res.text();
}

async function turnsClosed(g: TestGateway, series = 'warmroute_turns_total{'): Promise<number> {
  const text = await (await fetch(`${g.adminUrl}/metrics`)).text();
  let n = 0;
  for (const line of text.split('\n')) if (line.startsWith(series)) n += Number(line.slice(line.lastIndexOf(' ') + 1));
  return n;
}
/** Calls in the turns closed so far, both gateways (warmroute_turn_calls' sum). */
const callsCounted = async (a: TestGateway, b: TestGateway) => (await turnsClosed(a, 'warmroute_turn_calls_sum')) + (await turnsClosed(b, 'warmroute_turn_calls_sum'));

/** One streamed, stored Responses API call, keyless: the id of the response relayed. */
async function respond(g: TestGateway, body: Record<string, unknown>): Promise<string> {
  const res = await fetch(`${g.url}/v1/responses`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: DEFAULT_MODEL, stream: true, store: true, max_output_tokens: 4, ...body }),
  });
  assert.equal(res.status, 200);
  const id = /"id":"(resp_[^"]+)"/.exec(await res.text())?.[1];
  assert.ok(id, 'a response id');
  return id;
}

const view = async (g: TestGateway, key: string): Promise<any> => (await fetch(`${g.adminUrl}/admin/sessions/${encodeURIComponent(key)}`)).json();

const SYSTEM = { role: 'system', content: 'You are the booking line of a public clinic. Keep answers short.' };
const CLASSIFY = { role: 'system', content: 'Classify the caller\'s intent: book, cancel, ask, other. Answer with one word.' };
const EXTRACT = { role: 'system', content: 'Extract the place and the time the caller names, as JSON.' };

describe('caller turns across two gateways on one Redis', () => {
  let redis: RedisChild;
  let fleet: SimFleet;
  let g1: TestGateway;
  let g2: TestGateway;
  before(async () => {
    redis = await startRedis();
    fleet = await startFleet({ replicas: 2, ...FAST });
    const config = { redis: { url: redis.url, keyPrefix: 'ta:' }, turns: { idleMs: 5_000, budgetMs: 250 }, health: { probeIntervalMs: 600_000 } };
    [g1, g2] = await Promise.all([startGateway(fleet.urls, config), startGateway(fleet.urls, config)]);
  });
  after(async () => {
    await Promise.allSettled([g1?.close(), g2?.close()]);
    await fleet.close();
    await redis.kill();
  });

  for (const keyed of [true, false]) {
    it(`${keyed ? 'a keyed' : 'a keyless'} 3-call turn whose calls go to two gateways is one turn of 3 calls, counted once`, async () => {
      const key = keyed ? 'across-1' : null;
      const u1 = { role: 'user', content: `I need to see a doctor in Mapo tomorrow at ten (${keyed})` };
      // Keyless calls of one turn share their conversation (the task as a trailing system message).
      const callOf = (task: Msg) => (keyed ? [task, u1] : [SYSTEM, u1, task]);
      const before = (await turnsClosed(g1)) + (await turnsClosed(g2));
      const callsBefore = await callsCounted(g1, g2);
      await chat(g1, callOf(CLASSIFY), key);
      // g2 must know of the turn g1 opened before its call arrives (a pub/sub hop).
      await new Promise((r) => setTimeout(r, 50));
      await chat(g2, callOf(EXTRACT), key);
      await chat(g1, [SYSTEM, u1], key);
      // The next utterance, on the other gateway: it closes turn 0 where it is counted.
      const next = [SYSTEM, u1, { role: 'assistant', content: 'Booked.' }, { role: 'user', content: 'Thanks, bye' }];
      await new Promise((r) => setTimeout(r, 50));
      await chat(g2, next, key);
      await waitFor('turn 0 closed once', async () => (await turnsClosed(g1)) + (await turnsClosed(g2)) - before >= 1, 3_000);
      await new Promise((r) => setTimeout(r, 100));
      assert.equal((await turnsClosed(g1)) + (await turnsClosed(g2)) - before, 1, 'one turn counted, by one gateway');
      assert.equal(await callsCounted(g1, g2) - callsBefore, 3, 'of 3 calls (warmroute_turn_calls)');
      if (keyed) {
        const v = await view(g1, 'across-1');
        assert.equal(v.turns.last.length, 1, JSON.stringify(v.turns));
        assert.deepEqual([v.turns.last[0].index, v.turns.last[0].calls, v.turns.last[0].closedBy], [0, 3, 'next']);
        // The next turn is g2's, and numbered after g1's.
        assert.deepEqual((await view(g2, 'across-1')).turns.open, { index: 1, calls: 1 });
      }
    });
  }

  it('a keyless Responses API chain whose calls alternate between the gateways is one conversation: its turns and calls numbered as on one gateway', async () => {
    const instructions = 'You are the keyless Responses API line of the harbour office, across two gateways.';
    const mine = (g: TestGateway) => accessLines(g.logs).filter((l) => l.path === '/v1/responses' && typeof l.turn === 'number');
    const [b1, b2] = [mine(g1).length, mine(g2).length];
    // A call names the previous response: the gateway that relayed it tells the other whose it was (a pub/sub hop).
    const hop = () => new Promise((r) => setTimeout(r, 50));
    const r0 = await respond(g1, { instructions, input: 'When does the ferry leave' });
    await hop();
    const r1 = await respond(g2, { instructions, previous_response_id: r0, input: 'And on Sundays' });
    await hop();
    const r2 = await respond(g1, { instructions, previous_response_id: r1, input: [{ type: 'function_call_output', call_id: 'call_1', output: '{"sunday":"10:00"}' }] });
    await hop();
    await respond(g2, { instructions, previous_response_id: r2, input: 'Thank you' });
    const l1 = (await waitForAccess(g1, () => mine(g1).length >= b1 + 2)).filter((l) => l.path === '/v1/responses' && typeof l.turn === 'number').slice(b1);
    const l2 = (await waitForAccess(g2, () => mine(g2).length >= b2 + 2)).filter((l) => l.path === '/v1/responses' && typeof l.turn === 'number').slice(b2);
    // On one gateway: [[0, 0], [1, 0], [1, 1], [2, 0]] (test/gateway/turns.test.ts).
    assert.deepEqual(l1.map((l) => [l.turn, l.call]), [[0, 0], [1, 1]], 'g1: turn 0, then the function_call_output carries on g2\'s turn 1');
    assert.deepEqual(l2.map((l) => [l.turn, l.call]), [[1, 0], [2, 0]], 'g2: turn 1 of the same conversation, then turn 2');
  });
});
