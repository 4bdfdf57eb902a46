// The openai npm SDK, as a voice agent uses it, through the gateway in front of simulated vLLM
// replicas: streaming, non-streaming, tool calls over two turns, and the gateway's HTTP errors
// surfacing as the SDK's own error classes.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import OpenAI, { APIError } from 'openai';
import { startFleet, type SimFleet } from '../../bench/sim/index.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { FAST } from '../sim/helpers.js';

const MODEL = 'google/gemma-4-31B-it';
const TOOLS: OpenAI.ChatCompletionTool[] = [{
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } }, required: ['city'] },
  },
}];
const SYSTEM = { role: 'system', content: 'You are a concise voice agent for a weather line.' } as const;

describe('the openai SDK through warmroute', () => {
  let fleet: SimFleet;
  let g: TestGateway;
  /** A client per call, as a voice agent builds one: the session key as a default header. */
  const client = (session: string, o: Partial<ConstructorParameters<typeof OpenAI>[0]> = {}) =>
    new OpenAI({ baseURL: `${g.url}/v1`, apiKey: 'sk-unused', maxRetries: 0, defaultHeaders: { 'x-session-id': session }, ...o });

  before(async () => {
    fleet = await startFleet({ replicas: 3, ...FAST, outputTokens: { min: 8, max: 16 } });
    g = await startGateway(fleet.urls, { limits: { bodyBytes: 64 * 1024 } });
    // Models are learned from each replica's /v1/models by the health probe.
    const models = await client('warm-up').models.list();
    assert.deepEqual(models.data.map((m) => m.id), [MODEL]);
  });
  after(async () => {
    await g?.close();
    await fleet?.close();
  });

  it('streams a chat completion, with usage and cached_tokens, and the route in the headers', async () => {
    const { data: stream, response } = await client('call-stream').chat.completions
      .create({ model: MODEL, stream: true, stream_options: { include_usage: true }, messages: [SYSTEM, { role: 'user', content: 'What is the weather like?' }] })
      .withResponse();
    assert.equal(response.headers.get('x-warmroute-route'), 'placed');
    assert.ok(response.headers.get('x-warmroute-replica'));
    let text = '';
    let usage: OpenAI.CompletionUsage | undefined;
    let finish: string | null = null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
      if (chunk.usage) usage = chunk.usage;
    }
    assert.ok(text.length > 0);
    assert.equal(finish, 'stop');
    assert.ok(usage && usage.prompt_tokens > 0 && usage.completion_tokens > 0);
    assert.equal(typeof usage.prompt_tokens_details?.cached_tokens, 'number');
  });

  it('answers a non-streaming chat completion, and the next turn of the call is pinned to the same replica', async () => {
    const c = client('call-plain');
    const first = await c.chat.completions.create({ model: MODEL, messages: [SYSTEM, { role: 'user', content: 'Hello' }] }).withResponse();
    const answer = first.data.choices[0].message;
    assert.equal(answer.role, 'assistant');
    assert.ok(answer.content);
    assert.equal(first.data.usage?.total_tokens, first.data.usage!.prompt_tokens + first.data.usage!.completion_tokens);
    const second = await c.chat.completions.create({
      model: MODEL, messages: [SYSTEM, { role: 'user', content: 'Hello' }, { role: 'assistant', content: answer.content }, { role: 'user', content: 'And tomorrow?' }],
    }).withResponse();
    assert.equal(second.response.headers.get('x-warmroute-route'), 'pinned');
    assert.equal(second.response.headers.get('x-warmroute-replica'), first.response.headers.get('x-warmroute-replica'));
    // The second turn starts from the first's cached prefix.
    assert.ok((second.data.usage?.prompt_tokens_details?.cached_tokens ?? 0) > 0);
  });

  it('streams a tool call the SDK assembles, then the answer after the tool result, on one replica', async () => {
    // The stream helper does not give its response: where each request went is read from the
    // gateway's headers as they arrive.
    const routed: { replica: string | null; route: string | null }[] = [];
    const c = client('call-tools', {
      fetch: async (input, init) => {
        const res = await fetch(input, init);
        routed.push({ replica: res.headers.get('x-warmroute-replica'), route: res.headers.get('x-warmroute-route') });
        return res;
      },
    });
    const messages: OpenAI.ChatCompletionMessageParam[] = [SYSTEM, { role: 'user', content: 'Please call the weather tool for Lisbon.' }];
    const runner = c.chat.completions.stream({ model: MODEL, messages, tools: TOOLS, stream_options: { include_usage: true } });
    const replicas: string[] = [];
    const first = await runner.finalChatCompletion();
    assert.equal(routed.length, 1);
    assert.ok(routed[0].replica, 'the streamed turn names its replica');
    replicas.push(routed[0].replica!);
    const call = first.choices[0].message.tool_calls?.[0];
    assert.equal(first.choices[0].finish_reason, 'tool_calls');
    assert.ok(call && call.type === 'function');
    assert.equal(call.function.name, 'get_weather');
    assert.equal(typeof JSON.parse(call.function.arguments), 'object');
    const turn2 = await c.chat.completions.create({
      model: MODEL, tools: TOOLS,
      messages: [...messages, first.choices[0].message, { role: 'tool', tool_call_id: call.id, content: '{"temp_c":21,"sky":"clear"}' }],
    }).withResponse();
    assert.ok(turn2.data.choices[0].message.content);
    assert.equal(turn2.response.headers.get('x-warmroute-route'), 'pinned', 'the tool result goes where the call was');
    replicas.push(turn2.response.headers.get('x-warmroute-replica')!);
    // Non-streaming tool call, same session: the same replica again.
    const plain = await c.chat.completions.create({ model: MODEL, tools: TOOLS, tool_choice: 'required', messages: [SYSTEM, { role: 'user', content: 'Weather in Porto?' }] }).withResponse();
    assert.equal(plain.data.choices[0].message.tool_calls?.[0].type, 'function');
    replicas.push(plain.response.headers.get('x-warmroute-replica')!);
    assert.equal(replicas.length, 3);
    assert.equal(new Set(replicas).size, 1, `one replica for the call: ${replicas.join(', ')}`);
  });

  it('HTTP errors are the SDK\'s error classes, with the OpenAI code', async () => {
    const c = client('call-errors');
    const expectError = async (p: Promise<unknown>, cls: new (...a: any[]) => APIError, status: number, code: string | number) => {
      const err = await p.then(() => null, (e: unknown) => e);
      assert.ok(err instanceof cls, `expected ${cls.name}, got ${(err as Error)?.constructor?.name}: ${(err as Error)?.message}`);
      assert.equal(err.status, status);
      assert.equal(err.code, code);
      return err;
    };
    const user = [{ role: 'user' as const, content: 'hi' }];
    await expectError(c.chat.completions.create({ model: 'no-such-model', messages: user }), OpenAI.NotFoundError, 404, 'model_not_found');
    await expectError(client('x'.repeat(300)).chat.completions.create({ model: MODEL, messages: user }), OpenAI.BadRequestError, 400, 'session_key_too_long');
    const big = await expectError(c.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'x'.repeat(100 * 1024) }] }), OpenAI.APIError, 413, 'request_too_large');
    assert.match(big.message, /65536-byte limit/);
    // Every replica refuses (vLLM's 503 when its queue is full): failover runs out and the last
    // replica's own answer (vLLM's body, whose code is the status) reaches the SDK, which raises.
    for (const r of fleet.replicas) r.fault({ kind: 'busy', times: 10 });
    try {
      await expectError(c.chat.completions.create({ model: MODEL, messages: user }), OpenAI.InternalServerError, 503, 503);
    } finally {
      for (const r of fleet.replicas) r.clearFaults();
    }
  });
});
