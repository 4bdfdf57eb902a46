// The simulator's /v1/messages and /v1/messages/count_tokens, in the shapes vLLM's Anthropic
// entrypoint produces: named events in order, the whole message, tool_use blocks, errors.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DEFAULT_MODEL } from '../../bench/sim/config.js';
import { createSseEvents } from '../../src/stream/sse-events.js';
import { FAST, postJson, replica } from './helpers.js';

const TOOLS = [{ name: 'get_weather', description: 'Weather', input_schema: { type: 'object', properties: { city: { type: 'string' } } } }];
const ask = (extra: object = {}) => ({ model: DEFAULT_MODEL, max_tokens: 64, system: [{ type: 'text', text: 'Be brief.', cache_control: { type: 'ephemeral' } }], messages: [{ role: 'user', content: 'Hello there' }], ...extra });

function eventsOf(text: string): { event: string | undefined; data: any }[] {
  const out: { event: string | undefined; data: any }[] = [];
  const reader = createSseEvents((e) => out.push({ event: e.event, data: JSON.parse(e.data) }));
  reader.push(text);
  reader.end();
  return out;
}

describe('simulator: Anthropic Messages', () => {
  it('streams named events in vLLM\'s order, each event\'s name its data\'s type', async (t) => {
    const r = await replica(t, FAST);
    const res = await postJson(r.url, '/v1/messages', ask({ stream: true }));
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
    const events = eventsOf(res.text);
    for (const e of events) assert.equal(e.event, e.data.type);
    const names = events.map((e) => e.event);
    assert.deepEqual(names.slice(0, 2), ['message_start', 'content_block_start']);
    assert.deepEqual(names.slice(-3), ['content_block_stop', 'message_delta', 'message_stop']);
    assert.ok(names.slice(2, -3).every((n) => n === 'content_block_delta'));
    const start = events[0].data.message;
    assert.match(start.id, /^chatcmpl-/);
    assert.deepEqual(Object.keys(start), ['id', 'content', 'model', 'stop_reason', 'stop_sequence', 'usage']);
    assert.deepEqual(start.usage, { input_tokens: start.usage.input_tokens, output_tokens: 0 });
    const delta = events.at(-2)!.data;
    assert.equal(delta.delta.stop_reason, 'end_turn');
    assert.equal(delta.usage.input_tokens, start.usage.input_tokens);
    assert.equal(delta.usage.output_tokens, r.requests().at(-1)!.completionTokens);
    assert.equal(r.requests().at(-1)!.kind, 'messages');
  });

  it('answers a whole message, and renders a repeated prompt from the prefix cache', async (t) => {
    const r = await replica(t, FAST);
    const first = await postJson(r.url, '/v1/messages', ask());
    assert.equal(first.status, 200);
    assert.deepEqual(Object.keys(first.json), ['id', 'type', 'role', 'content', 'model', 'stop_reason', 'usage']);
    assert.equal(first.json.type, 'message');
    assert.equal(first.json.content[0].type, 'text');
    assert.equal(first.json.stop_reason, 'end_turn');
    const said = first.json.content[0].text;
    await postJson(r.url, '/v1/messages', ask({ messages: [{ role: 'user', content: 'Hello there' }, { role: 'assistant', content: said }, { role: 'user', content: 'More?' }] }));
    assert.ok(r.requests().at(-1)!.cachedTokens > 0);
  });

  it('streams a tool call as a tool_use block with input_json_delta fragments that join to its input', async (t) => {
    const r = await replica(t, FAST);
    const res = await postJson(r.url, '/v1/messages', ask({ stream: true, max_tokens: 400, tools: TOOLS, messages: [{ role: 'user', content: 'Call the weather tool' }] }));
    const events = eventsOf(res.text);
    const start = events.find((e) => e.event === 'content_block_start')!.data;
    assert.equal(start.content_block.type, 'tool_use');
    assert.equal(start.content_block.name, 'get_weather');
    const input = events.filter((e) => e.data.delta?.type === 'input_json_delta').map((e) => e.data.delta.partial_json).join('');
    assert.equal(typeof JSON.parse(input).city, 'string');
    assert.equal(events.find((e) => e.event === 'message_delta')!.data.delta.stop_reason, 'tool_use');
  });

  it('counts tokens without generating, and answers errors as vLLM does', async (t) => {
    const r = await replica(t, FAST);
    const counted = await postJson(r.url, '/v1/messages/count_tokens', { model: DEFAULT_MODEL, messages: [{ role: 'user', content: 'Hello there' }] });
    assert.equal(counted.status, 200);
    assert.deepEqual(counted.json, { input_tokens: counted.json.input_tokens, context_management: { original_input_tokens: counted.json.input_tokens } });
    assert.ok(counted.json.input_tokens > 3);
    assert.equal(r.requests().length, 0, 'nothing generated');
    const unknown = await postJson(r.url, '/v1/messages', ask({ model: 'other' }));
    assert.equal(unknown.status, 404);
    assert.deepEqual(Object.keys(unknown.json), ['type', 'error']);
    assert.equal(unknown.json.error.type, 'NotFoundError');
    // Request validation answers for every route alike, in the OpenAI-style shape.
    const missing = await postJson(r.url, '/v1/messages', { model: DEFAULT_MODEL, messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(missing.status, 400);
    assert.equal(missing.json.error.param, 'body.max_tokens');
    const empty = await postJson(r.url, '/v1/messages', ask({ messages: [] }));
    assert.equal(empty.status, 400);
    assert.equal(empty.json.type, 'error');
  });
});
