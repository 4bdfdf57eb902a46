// The Anthropic npm SDK, as an agent built on it uses it with its base URL at the gateway, in front
// of simulated vLLM replicas speaking the Messages API: streaming and not, a tool call over two
// turns, keyed and keyless conversations kept on one replica, count_tokens, a replica dying
// mid-stream raised by the SDK, and the gateway's own errors raised as the SDK's error classes.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import { startFleet, type SimFleet } from '../../bench/sim/index.js';
import { startGateway, waitForAccess, type TestGateway } from '../helpers/gateway.js';
import { FAST } from '../sim/helpers.js';

const MODEL = 'google/gemma-4-31B-it';
const SYSTEM = 'You are a concise voice agent for a weather line. '.repeat(8);
const TOOLS: Anthropic.Tool[] = [{
  name: 'get_weather',
  description: 'Current weather in a city',
  input_schema: { type: 'object', properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } }, required: ['city'] },
}];

/** The gateway's headers of the last response, read as it arrives (the stream helpers hide their response). */
function recordingFetch(seen: Headers[]): typeof fetch {
  return async (input, init) => {
    const res = await fetch(input, init);
    seen.push(res.headers);
    return res;
  };
}

describe('the Anthropic SDK through warmroute', () => {
  let fleet: SimFleet;
  let g: TestGateway;
  const seen: Headers[] = [];
  const client = (session: string | null, o: Partial<ConstructorParameters<typeof Anthropic>[0]> = {}) =>
    new Anthropic({
      baseURL: g.url, apiKey: 'sk-unused', maxRetries: 0, fetch: recordingFetch(seen),
      defaultHeaders: session === null ? {} : { 'x-session-id': session }, ...o,
    });
  const last = () => seen[seen.length - 1];

  before(async () => {
    fleet = await startFleet({ replicas: 3, ...FAST, outputTokens: { min: 8, max: 16 } });
    g = await startGateway(fleet.urls);
    // The replicas' models are learned by the health probe: a request waits for it.
    const deadline = Date.now() + 5_000;
    while (Date.now() < deadline) {
      const r = await fetch(`${g.url}/v1/models`);
      await r.arrayBuffer();
      if (r.status === 200) break;
      await new Promise((res) => setTimeout(res, 20));
    }
  });
  after(async () => {
    await g?.close();
    await fleet?.close();
  });

  it('streams a message: text deltas, the stop reason and usage, timed from its first content delta', async () => {
    const stream = client('msg-stream').messages.stream({ model: MODEL, max_tokens: 64, system: SYSTEM, messages: [{ role: 'user', content: 'What is the weather like?' }] });
    let text = '';
    stream.on('text', (t) => { text += t; });
    const final = await stream.finalMessage();
    assert.ok(text.length > 0);
    assert.equal(final.stop_reason, 'end_turn');
    assert.equal(final.content[0].type, 'text');
    assert.ok(final.usage.input_tokens > 0 && final.usage.output_tokens > 0);
    assert.equal(last().get('x-warmroute-route'), 'placed');
    const mine = (await waitForAccess(g, (ls) => ls.some((l) => l.path === '/v1/messages' && l.stream === true), 10_000)).find((l) => l.path === '/v1/messages' && l.stream === true)!;
    assert.equal(mine.status, 200);
    assert.equal(mine.done, true, 'message_stop seen');
    assert.equal(mine.firstToken, 'content');
    // TTFT ends on the first text delta, after message_start and content_block_start came by.
    assert.ok(mine.ttftMs > 0 && mine.upstreamFirstTokenMs >= 0 && mine.streamMs >= 0, JSON.stringify(mine));
    assert.equal(mine.promptTokens, final.usage.input_tokens, 'usage read from message_delta');
    assert.equal(mine.completionTokens, final.usage.output_tokens);
  });

  it('answers a whole message, and the next keyed turn is pinned to the same replica with its prefix cached', async () => {
    const c = client('msg-plain');
    const first = await c.messages.create({ model: MODEL, max_tokens: 64, system: SYSTEM, messages: [{ role: 'user', content: 'Hello' }] }).withResponse();
    assert.equal(first.data.type, 'message');
    assert.equal(first.data.role, 'assistant');
    const said = first.data.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
    assert.ok(said.length > 0);
    const replica = first.response.headers.get('x-warmroute-replica');
    assert.ok(replica);
    const second = await c.messages.create({
      model: MODEL, max_tokens: 64, system: SYSTEM,
      messages: [{ role: 'user', content: 'Hello' }, { role: 'assistant', content: said }, { role: 'user', content: 'And tomorrow?' }],
    }).withResponse();
    assert.equal(second.response.headers.get('x-warmroute-route'), 'pinned');
    assert.equal(second.response.headers.get('x-warmroute-replica'), replica);
    const r = fleet.replicas.find((x) => replica.endsWith(`:${x.port}`))!;
    const served = r.requests().filter((q) => q.kind === 'messages');
    assert.ok(served.at(-1)!.cachedTokens > 0, 'the second turn started from the first turn\'s cached prefix');
  });

  it('keyless: each turn of a conversation lands where the one before it ran (route prefix)', async () => {
    const c = client(null);
    const run = async (i: number) => {
      const system = `${SYSTEM} Agent ${i}.`;
      const messages: Anthropic.MessageParam[] = [];
      const places: { route: string | null; replica: string | null }[] = [];
      for (let t = 0; t < 4; t++) {
        // As agents do: the cache breakpoint moves to the newest message every turn, and metadata
        // changes. Neither is prompt text, so neither may move the conversation off its prefix.
        for (const m of messages) if (Array.isArray(m.content)) for (const b of m.content) delete (b as { cache_control?: unknown }).cache_control;
        messages.push({ role: 'user', content: [{ type: 'text', text: `Caller ${i}, turn ${t}: is it raining?`, cache_control: { type: 'ephemeral' } }] });
        const r = await c.messages.create({ model: MODEL, max_tokens: 32, system, messages, metadata: { user_id: `user-${i}-${t}` } }).withResponse();
        places.push({ route: r.response.headers.get('x-warmroute-route'), replica: r.response.headers.get('x-warmroute-replica') });
        messages.push({ role: 'assistant', content: r.data.content as Anthropic.ContentBlockParam[] });
      }
      return places;
    };
    for (const places of await Promise.all([0, 1, 2].map(run))) {
      for (let t = 1; t < places.length; t++) {
        assert.equal(places[t].route, 'prefix', `turn ${t}`);
        assert.equal(places[t].replica, places[0].replica, `turn ${t}`);
      }
    }
  });

  it('streams a tool call the SDK assembles, then the answer after the tool result, on one replica', async () => {
    const c = client('msg-tools');
    const messages: Anthropic.MessageParam[] = [{ role: 'user', content: 'Call the weather tool for Paris' }];
    const call = await c.messages.stream({ model: MODEL, max_tokens: 512, system: SYSTEM, tools: TOOLS, messages }).finalMessage();
    const replica = last().get('x-warmroute-replica');
    assert.equal(call.stop_reason, 'tool_use');
    const use = call.content.find((b): b is Anthropic.ToolUseBlock => b.type === 'tool_use');
    assert.ok(use, 'a tool_use block');
    assert.equal(use.name, 'get_weather');
    assert.equal(typeof (use.input as Record<string, unknown>).city, 'string', 'input assembled from input_json_delta');
    const line = (await waitForAccess(g, (ls) => ls.some((l) => l.path === '/v1/messages' && l.firstToken === 'tool_call'), 10_000)).filter((l) => l.firstToken === 'tool_call').at(-1)!;
    assert.ok(line.ttftMs > 0, 'the first input_json_delta ends the TTFT');
    messages.push({ role: 'assistant', content: call.content as Anthropic.ContentBlockParam[] });
    messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: '18 degrees, clear' }] });
    const answer = await c.messages.create({ model: MODEL, max_tokens: 64, system: SYSTEM, tools: TOOLS, messages }).withResponse();
    assert.equal(answer.data.stop_reason, 'end_turn');
    assert.equal(answer.response.headers.get('x-warmroute-replica'), replica);
  });

  it('raises a replica dying mid-stream as an API error, never a silently short message', async () => {
    for (const r of fleet.replicas) r.fault({ kind: 'die-mid-stream', afterChunks: 2, times: 1 });
    try {
      const stream = client('msg-dies').messages.stream({ model: MODEL, max_tokens: 64, messages: [{ role: 'user', content: 'Tell me a story' }] });
      let text = '';
      stream.on('text', (t) => { text += t; });
      await assert.rejects(stream.finalMessage(), (e: unknown) => {
        assert.ok(e instanceof Anthropic.APIError, String(e));
        assert.equal((e.error as { error?: { type?: string } }).error?.type, 'api_error');
        assert.match(e.message, /failed mid-stream/);
        return true;
      });
      assert.ok(text.length > 0, 'the first chunks arrived before the failure');
      const line = (await waitForAccess(g, (ls) => ls.some((l) => l.outcome === 'interrupted'), 10_000)).find((l) => l.outcome === 'interrupted')!;
      assert.equal(line.path, '/v1/messages');
    } finally {
      for (const r of fleet.replicas) r.clearFaults('die-mid-stream');
    }
  });

  it('forwards count_tokens to a replica serving the model, and refuses a model none serves in Anthropic\'s shape', async () => {
    const c = client('msg-count');
    const counted = await c.messages.countTokens({ model: MODEL, system: SYSTEM, messages: [{ role: 'user', content: 'How many tokens is this?' }] }).withResponse();
    assert.ok(counted.data.input_tokens > 10);
    assert.ok(counted.response.headers.get('x-warmroute-replica'));
    await assert.rejects(c.messages.countTokens({ model: 'no-such-model', messages: [{ role: 'user', content: 'hi' }] }), (e: unknown) => {
      assert.ok(e instanceof Anthropic.NotFoundError, String(e));
      assert.equal((e.error as { type: string }).type, 'error');
      assert.equal((e.error as { error: { type: string } }).error.type, 'not_found_error');
      return true;
    });
  });

  it('writes the gateway\'s own refusals in Anthropic\'s shape, with the status the SDK maps', async () => {
    await assert.rejects(client('msg-bad').messages.create({ model: MODEL, max_tokens: 16, messages: [] }), (e: unknown) => {
      assert.ok(e instanceof Anthropic.BadRequestError, String(e));
      assert.deepEqual(e.error, { type: 'error', error: { type: 'invalid_request_error', message: '`messages` must hold at least one message' } });
      return true;
    });
  });

  it('raises the max_tokens floor of a request offering tools, and says so', async () => {
    const r = await client('msg-floor').messages.create({ model: MODEL, max_tokens: 8, tools: TOOLS, messages: [{ role: 'user', content: 'Hi' }] }).withResponse();
    assert.equal(r.response.headers.get('x-warmroute-adjusted'), 'max_tokens=256');
  });
});

describe('the Anthropic SDK with client keys on the gateway', () => {
  it('is let in by its x-api-key and refused with authentication_error without a good one', async () => {
    const fleet = await startFleet({ replicas: 1, ...FAST, outputTokens: { min: 4, max: 8 } });
    const key = 'sk-gateway-client-key';
    const g = await startGateway(fleet.urls, { auth: { apiKeys: [{ name: 'agent', sha256: createHash('sha256').update(key).digest('hex') }] } });
    try {
      const ok = new Anthropic({ baseURL: g.url, apiKey: key, maxRetries: 0 });
      const deadline = Date.now() + 5_000;
      let answer: Anthropic.Message | null = null;
      while (answer === null && Date.now() < deadline) {
        try {
          answer = await ok.messages.create({ model: MODEL, max_tokens: 16, messages: [{ role: 'user', content: 'Hi' }] });
        } catch (e) {
          // Until the health probe has learned the replica's model.
          if (!(e instanceof Anthropic.APIError) || e.status !== 503) throw e;
          await new Promise((res) => setTimeout(res, 20));
        }
      }
      assert.equal(answer?.type, 'message');
      const bad = new Anthropic({ baseURL: g.url, apiKey: 'sk-wrong', maxRetries: 0 });
      await assert.rejects(bad.messages.create({ model: MODEL, max_tokens: 16, messages: [{ role: 'user', content: 'Hi' }] }), (e: unknown) => {
        assert.ok(e instanceof Anthropic.AuthenticationError, String(e));
        assert.equal((e.error as { error: { type: string } }).error.type, 'authentication_error');
        return true;
      });
    } finally {
      await g.close();
      await fleet.close();
    }
  });
});
