// The Responses API through warmroute, on four simulated vLLM replicas that each keep their own
// response store (as vLLM does with VLLM_ENABLE_RESPONSES_API_STORE=1), driven by the official
// openai SDK's client.responses.create.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import OpenAI from 'openai';
import { startFleet, type SimFleet } from '../../bench/sim/index.js';
import { accessLines, startGateway, waitForAccess, type TestGateway } from '../helpers/gateway.js';
import { rawResponse, startRawReplica } from '../helpers/raw-replica.js';
import { waitFor } from '../helpers/wait.js';
import { FAST, text } from '../sim/helpers.js';

const MODEL = 'google/gemma-4-31B-it';

interface Turn {
  id: string;
  text: string;
  output: OpenAI.Responses.ResponseOutputItem[];
  inputTokens: number;
  cachedTokens: number;
  replica: string;
  route: string;
}

/** One client.responses.create, streamed or not, with the gateway's routing headers. */
async function create(client: OpenAI, params: OpenAI.Responses.ResponseCreateParamsNonStreaming, stream: boolean): Promise<Turn> {
  const headersOf = (r: Response) => ({ replica: r.headers.get('x-warmroute-replica') ?? '', route: r.headers.get('x-warmroute-route') ?? '' });
  if (!stream) {
    const { data, response } = await client.responses.create({ ...params, stream: false }).withResponse();
    return { id: data.id, text: data.output_text, output: data.output, inputTokens: data.usage!.input_tokens, cachedTokens: data.usage!.input_tokens_details.cached_tokens, ...headersOf(response) };
  }
  const { data, response } = await client.responses.create({ ...params, stream: true }).withResponse();
  let text = '';
  let done: OpenAI.Responses.Response | null = null;
  for await (const e of data) {
    if (e.type === 'response.output_text.delta') text += e.delta;
    if (e.type === 'response.completed') done = e.response;
  }
  assert.ok(done, 'the stream ended with response.completed');
  return { id: done.id, text, output: done.output, inputTokens: done.usage!.input_tokens, cachedTokens: done.usage!.input_tokens_details.cached_tokens, ...headersOf(response) };
}

const client = (g: TestGateway, maxRetries = 0) => new OpenAI({ baseURL: `${g.url}/v1`, apiKey: 'sk-test', maxRetries });

async function metric(g: TestGateway, name: string): Promise<string> {
  return (await fetch(`${g.adminUrl}/metrics`)).text().then((t) => t.split('\n').filter((l) => l.startsWith(name)).join('\n'));
}

/**
 * A conversation chained by previous_response_id with store: true and no session key: only the
 * stored response ties its turns together. Failed turns are kept (status and error), and the next
 * turn continues from the last response that succeeded, as an agent would retry.
 */
async function chained(c: OpenAI, instructions: string, turns: number, tag: string) {
  const results: (Turn | { error: unknown })[] = [];
  let prev: string | undefined;
  for (let t = 0; t < turns; t++) {
    try {
      const r = await create(c, { model: MODEL, instructions, input: `${tag}: turn ${t}, ${text(10, tag)}`, store: true, previous_response_id: prev }, t % 2 === 1);
      results.push(r);
      prev = r.id;
    } catch (error) {
      results.push({ error });
    }
  }
  return results;
}

describe('Responses API through warmroute (4 simulated vLLM replicas, the openai SDK)', () => {
  let fleet: SimFleet;
  before(async () => { fleet = await startFleet({ replicas: 4, ...FAST }); });
  after(async () => { await fleet.close(); });

  it('previous_response_id with store: true: every turn of every conversation succeeds, on the replica that stores it (pinned)', async () => {
    const g = await startGateway(fleet.urls);
    try {
      const c = client(g);
      const instructions = `You are a booking agent. ${text(200, 'inst-a')}`;
      const convs = await Promise.all(Array.from({ length: 6 }, (_, i) => chained(c, instructions, 5, `conv-${i}`)));
      const homes = new Set<string>();
      for (const [i, conv] of convs.entries()) {
        const turns = conv.map((r) => { assert.ok(!('error' in r), `conversation ${i}: ${String((r as { error: unknown }).error)}`); return r as Turn; });
        homes.add(turns[0].replica);
        for (const [t, r] of turns.entries()) {
          assert.equal(r.replica, turns[0].replica, `conversation ${i} turn ${t} moved`);
          if (t > 0) {
            assert.equal(r.route, 'pinned');
            assert.ok(r.cachedTokens >= turns[t - 1].inputTokens - 16, `turn ${t} warm through the stored history: ${r.cachedTokens} of ${r.inputTokens}`);
          }
        }
        const admin = await (await fetch(`${g.adminUrl}/admin/responses/${turns[4].id}`)).json() as { replica: string };
        assert.equal(admin.replica, turns[0].replica);
      }
      assert.ok(homes.size > 1, 'keyless conversations still spread over the fleet');
      // Retrieve and cancel name the id in the path: they reach the replica that stores it too.
      for (const conv of convs) {
        const last = conv[4] as Turn;
        const { data, response } = await c.responses.retrieve(last.id).withResponse();
        assert.equal(data.id, last.id);
        assert.deepEqual([response.headers.get('x-warmroute-replica'), response.headers.get('x-warmroute-route')], [last.replica, 'pinned']);
        const cancel = await fetch(`${g.url}/v1/responses/${last.id}/cancel`, { method: 'POST' });
        assert.equal(cancel.status, 400, 'the holder answers: a synchronous response cannot be cancelled (elsewhere: 404)');
        assert.equal(cancel.headers.get('x-warmroute-replica'), last.replica);
      }
      assert.match(await metric(g, 'warmroute_state_lost_total'), /reason="unknown"\} 0/);
      assert.match(await metric(g, 'warmroute_response_records'), /warmroute_response_records 30/);
    } finally {
      await g.close();
    }
  });

  it('the same conversations through round-robin: follow-ups land on replicas that never stored the response (vLLM\'s 404)', async () => {
    const g = await startGateway(fleet.urls, { routing: { strategy: 'round-robin' } });
    try {
      const c = client(g);
      const convs = [];
      for (let i = 0; i < 3; i++) convs.push(await chained(c, `You are a booking agent. ${text(200, 'inst-b')}`, 5, `rr-${i}`));
      const followUps = convs.flatMap((conv) => conv.slice(1));
      const failed = followUps.filter((r) => 'error' in r) as { error: unknown }[];
      assert.ok(failed.length >= followUps.length / 2, `${failed.length} of ${followUps.length} follow-ups failed`);
      for (const f of failed) {
        assert.ok(f.error instanceof OpenAI.NotFoundError, String(f.error));
        assert.match((f.error as Error).message, /Response with id 'resp_[0-9a-f]+' not found/);
      }
    } finally {
      await g.close();
    }
  });

  it('a keyless store: false conversation that resends its history stays where its prefix is warm (route prefix)', async () => {
    const g = await startGateway(fleet.urls);
    try {
      const c = client(g);
      const run = async (i: number) => {
        const instructions = `You are agent ${i}. ${text(400, `inst-warm-${i}`)}`;
        let input: OpenAI.Responses.ResponseInputItem[] = [];
        const turns: Turn[] = [];
        for (let t = 0; t < 5; t++) {
          const say = `Caller ${i}, turn ${t}: ${text(12, `say-${i}-${t}`)}`;
          input = [...input, { role: 'user', content: say }];
          // The first turn as a plain string, as clients start; the history as items afterwards.
          const r = await create(c, { model: MODEL, instructions, input: t === 0 ? say : input, store: false }, t % 2 === 0);
          turns.push(r);
          input = [...input, ...(r.output as OpenAI.Responses.ResponseInputItem[])];
        }
        return turns;
      };
      const convs = await Promise.all([0, 1, 2].map(run));
      for (const turns of convs) {
        for (let t = 1; t < turns.length; t++) {
          assert.equal(turns[t].route, 'prefix', `turn ${t}`);
          assert.equal(turns[t].replica, turns[0].replica);
          assert.ok(turns[t].cachedTokens >= turns[t - 1].inputTokens - 16, `turn ${t}: ${turns[t].cachedTokens} cached of ${turns[t].inputTokens}`);
        }
      }
      assert.equal(await (await fetch(`${g.adminUrl}/admin/responses/${convs[0][4].id}`)).status, 404, 'store: false: nothing recorded');
    } finally {
      await g.close();
    }
  });

  it('the replica holding the state goes down: the client gets 409 response_state_lost naming it, once (no SDK retry), and the counter moves', async () => {
    const g = await startGateway(fleet.urls);
    let crashed: (typeof fleet.replicas)[number] | undefined;
    try {
      const c = client(g, 2);
      const first = await create(c, { model: MODEL, input: 'Book me in, please.', store: true }, false);
      crashed = fleet.replicas.find((r) => first.replica.endsWith(`:${r.port}`))!;
      crashed.fault({ kind: 'crash' });
      await waitFor('the crashed replica to be down', async () => ((await (await fetch(`${g.adminUrl}/admin/replicas`)).json()) as { replicas: { name: string; state: string }[] }).replicas.some((r) => r.name === first.replica && r.state === 'down'), 5_000);
      await assert.rejects(create(c, { model: MODEL, input: 'Tomorrow.', previous_response_id: first.id }, true), (e: unknown) => {
        assert.ok(e instanceof OpenAI.ConflictError, String(e));
        assert.equal(e.status, 409);
        assert.equal(e.code, 'response_state_lost');
        assert.equal(e.param, 'previous_response_id');
        assert.match(e.message, new RegExp(`replica ${first.replica}, which is down`));
        return true;
      });
      // Any SDK retry came (and was answered) before the rejection, so its line is in by the time this one is.
      const lost = (await waitForAccess(g, (ls) => ls.some((l) => l.err === 'response_state_lost'))).filter((l) => l.err === 'response_state_lost');
      assert.equal(lost.length, 1, 'x-should-retry: false kept the SDK from retrying a lost state');
      assert.equal(lost[0].status, 409);
      assert.match(await metric(g, 'warmroute_state_lost_total'), /reason="down"\} 1/);
    } finally {
      crashed?.fault({ kind: 'recover' });
      await g.close();
    }
  });

  it('the replica holding the state restarted: what it stored before is lost (409, reason restarted); what its new process stored is pinned there', async () => {
    // Scrapes by hand: the restart is noticed exactly when the test says.
    const g = await startGateway(fleet.urls, { health: { statsIntervalMs: 0 } });
    try {
      await g.gw.health.scrapeAll();
      // A session key keeps the turns on one replica until the restart is noticed.
      const c = new OpenAI({ baseURL: `${g.url}/v1`, apiKey: 'sk-test', maxRetries: 2, defaultHeaders: { 'x-session-id': 'restart-1' } });
      const before = await create(c, { model: MODEL, input: 'Book me in, please.', store: true }, false);
      const holder = fleet.replicas.find((r) => before.replica.endsWith(`:${r.port}`))!;
      const recorded = g.gw.router.storedResponse(before.id)!;
      await waitFor('a later millisecond than the record', () => Date.now() > recorded.since, 1_000);
      holder.fault({ kind: 'restart' });
      // Served by the new process before the gateway has looked at its /metrics.
      const since = await create(c, { model: MODEL, input: 'At nine.', store: true }, true);
      assert.equal(since.replica, before.replica);
      await g.gw.health.scrapeAll();
      await assert.rejects(create(c, { model: MODEL, input: 'Tomorrow.', previous_response_id: before.id }, false), (e: unknown) => {
        assert.ok(e instanceof OpenAI.ConflictError, String(e));
        assert.equal(e.code, 'response_state_lost');
        assert.match(e.message, new RegExp(`replica ${before.replica}, which has restarted since`));
        return true;
      });
      assert.match(await metric(g, 'warmroute_state_lost_total'), /reason="restarted"\} 1/);
      const next = await create(c, { model: MODEL, input: 'Thanks.', previous_response_id: since.id, store: true }, false);
      assert.deepEqual([next.replica, next.route], [before.replica, 'pinned']);
    } finally {
      await g.close();
    }
  });

  it('the gateway checks what it routes by: 405 for GET /v1/responses, 400s naming input and previous_response_id', async () => {
    const g = await startGateway(fleet.urls);
    try {
      const get = await fetch(`${g.url}/v1/responses`);
      assert.equal(get.status, 405);
      assert.equal(get.headers.get('allow'), 'POST');
      for (const [body, param] of [[{ model: MODEL, input: 5 }, 'input'], [{ model: MODEL, input: 'x', previous_response_id: ['resp_1'] }, 'previous_response_id']] as const) {
        const res = await fetch(`${g.url}/v1/responses`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
        assert.equal(res.status, 400);
        assert.equal(((await res.json()) as { error: { param: string } }).error.param, param);
      }
    } finally {
      await g.close();
    }
  });

  it('responses.onLostState forward: sent to the next choice as a failover, where vLLM does not know the id; counted all the same', async () => {
    const g = await startGateway(fleet.urls, { responses: { onLostState: 'forward' } });
    try {
      const c = client(g);
      const first = await create(c, { model: MODEL, input: 'Hello there.', store: true }, true);
      g.gw.registry.byName(first.replica)!.draining = true;
      const logged = accessLines(g.logs).length;
      await assert.rejects(create(c, { model: MODEL, input: 'And then?', previous_response_id: first.id }, false), (e: unknown) => e instanceof OpenAI.NotFoundError);
      const line = (await waitForAccess(g, (ls) => ls.length > logged)).at(-1)!;
      assert.equal(line.route, 'failover');
      assert.notEqual(line.replica, first.replica);
      assert.match(await metric(g, 'warmroute_state_lost_total'), /reason="draining"\} 1/);
    } finally {
      await g.close();
    }
  });
});

describe('Responses API stream through warmroute: bytes as sent, first token at the first delta', () => {
  const id = 'resp_0123456789abcdef0123456789abcdef';
  const ev = (type: string, data: object) => `event: ${type}\ndata: ${JSON.stringify({ ...data, type })}\n\n`;
  const head = ev('response.created', { response: { id, object: 'response', instructions: 'Say "text": "ok"', output: [], status: 'in_progress', usage: null }, sequence_number: 0 })
    + ev('response.output_item.added', { item: { id: 'msg_1', content: [], role: 'assistant', status: 'in_progress', type: 'message' }, output_index: 0, sequence_number: 1 })
    + ev('response.content_part.added', { content_index: 0, item_id: 'msg_1', output_index: 0, part: { annotations: [], text: '', type: 'output_text' }, sequence_number: 2 });
  const delta = ev('response.output_text.delta', { content_index: 0, delta: 'Hé—llo', item_id: 'msg_1', output_index: 0, sequence_number: 3 });
  const tail = ev('response.output_text.done', { content_index: 0, item_id: 'msg_1', output_index: 0, text: 'Hé—llo', sequence_number: 4 })
    + ev('response.completed', { response: { id, object: 'response', status: 'completed', usage: { input_tokens: 812, input_tokens_details: { cached_tokens: 800 }, output_tokens: 2, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 814 } }, sequence_number: 5 });

  it('relays every byte, ends TTFT at the output_text.delta, reads usage from response.completed and records the id', async () => {
    const replica = await startRawReplica((req) => {
      const s = req.socket;
      s.write(rawResponse(200, [['content-type', 'text/event-stream'], ['transfer-encoding', 'chunked']]));
      const chunk = (t: string) => s.write(`${Buffer.byteLength(t).toString(16)}\r\n${t}\r\n`);
      chunk(head);
      setTimeout(() => chunk(delta), 150);
      // The tail well after the delta, so a TTFT that ran to the end of the stream cannot pass for one that ended at the delta.
      setTimeout(() => { chunk(tail); s.write('0\r\n\r\n'); }, 1_500);
    });
    const g = await startGateway([replica.url]);
    try {
      const res = await fetch(`${g.url}/v1/responses`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'fixture-model', input: 'hi', stream: true }) });
      const body = Buffer.from(await res.arrayBuffer());
      assert.ok(body.equals(Buffer.from(head + delta + tail)), 'byte for byte');
      const line = (await waitForAccess(g, (ls) => ls.length > 0))[0];
      assert.ok(line.ttftMs >= 140 && line.ttftMs < 1_000, `TTFT ends at the first delta: ${line.ttftMs} ms`);
      assert.deepEqual([line.promptTokens, line.cachedTokens, line.completionTokens, line.done], [812, 800, 2, true]);
      const rec = await (await fetch(`${g.adminUrl}/admin/responses/${id}`)).json() as { replica: string };
      assert.equal(rec.replica, `127.0.0.1:${replica.port}`);
    } finally {
      await g.close();
      await replica.close();
    }
  });
});
