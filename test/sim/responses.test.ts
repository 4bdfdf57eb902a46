import assert from 'node:assert/strict';
import { test } from 'node:test';
import OpenAI from 'openai';
import { renderChat } from '../../bench/sim/index.js';
import { createSseEvents } from '../../src/stream/sse-events.js';
import { FAST, postJson, replica, text } from './helpers.js';

const MODEL = 'google/gemma-4-31B-it';
const INSTRUCTIONS = `You are a voice agent for a clinic. ${text(300, 'sys')}`;

interface Event { event: string; data: any }

/** POST /v1/responses with stream: true; every event, in order, parsed. */
async function streamed(url: string, body: Record<string, unknown>): Promise<{ status: number; events: Event[]; raw: string }> {
  const res = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: MODEL, stream: true, ...body }) });
  const raw = await res.text();
  const events: Event[] = [];
  const sse = createSseEvents((e) => events.push({ event: e.event ?? '', data: JSON.parse(e.data) }));
  sse.push(raw);
  sse.end();
  return { status: res.status, events, raw };
}

test('/v1/responses: a stored response continues by previous_response_id on the replica that stored it, warm, and nowhere else', async (t) => {
  const a = await replica(t, FAST);
  const b = await replica(t, FAST);
  const first = await postJson(a.url, '/v1/responses', { model: MODEL, instructions: INSTRUCTIONS, input: 'Hello, I need an appointment.' });
  assert.equal(first.status, 200);
  const r1 = first.json;
  assert.match(r1.id, /^resp_[0-9a-f]{16}$/);
  assert.equal(Object.keys(r1)[0], 'id', 'the id leads the object, as vLLM dumps it');
  assert.equal(r1.object, 'response');
  assert.equal(r1.status, 'completed');
  assert.equal(r1.output[0].type, 'message');
  const answer = r1.output[0].content[0].text as string;
  assert.ok(answer.length > 0);
  assert.equal(r1.usage.input_tokens_details.cached_tokens, 0);

  // The prompt is the chat template over the same messages vLLM builds: instructions as system first.
  const messages1 = [{ role: 'system', content: INSTRUCTIONS }, { role: 'user', content: 'Hello, I need an appointment.' }];
  assert.equal(r1.usage.input_tokens, renderChat(messages1).length);

  const follow = { model: MODEL, instructions: INSTRUCTIONS, previous_response_id: r1.id, input: [{ role: 'user', content: 'Tomorrow at nine, please.' }] };
  const second = await postJson(a.url, '/v1/responses', follow);
  assert.equal(second.status, 200);
  const messages2 = [...messages1, { role: 'assistant', content: answer }, { role: 'user', content: 'Tomorrow at nine, please.' }];
  assert.equal(second.json.usage.input_tokens, renderChat(messages2).length, 'stored input, then the stored answer, then the new input');
  // Warm through the previous prompt and its answer (full 16-token blocks only).
  const warm = Math.floor((r1.usage.input_tokens + r1.usage.output_tokens - 1) / 16) * 16;
  assert.ok(second.json.usage.input_tokens_details.cached_tokens >= warm - 16, `cached ${second.json.usage.input_tokens_details.cached_tokens} of ${warm}`);
  assert.equal(second.json.previous_response_id, r1.id);

  const elsewhere = await postJson(b.url, '/v1/responses', follow);
  assert.equal(elsewhere.status, 404);
  assert.deepEqual(elsewhere.json, { error: { message: `Response with id '${r1.id}' not found.`, type: 'invalid_request_error', param: 'response_id', code: 404 } });

  const got = await fetch(`${a.url}/v1/responses/${r1.id}`);
  assert.equal(got.status, 200);
  assert.deepEqual(await got.json(), r1);
  assert.equal((await fetch(`${b.url}/v1/responses/${r1.id}`)).status, 404);
  const cancel = await fetch(`${a.url}/v1/responses/${r1.id}/cancel`, { method: 'POST' });
  assert.equal(cancel.status, 400);
  assert.equal((await fetch(`${a.url}/v1/responses/${r1.id}`, { method: 'DELETE' })).status, 405);

  // store: false keeps nothing; a restart (crash + recover) or a reset forgets everything.
  const unstored = await postJson(a.url, '/v1/responses', { model: MODEL, input: 'hi', store: false });
  assert.equal((await fetch(`${a.url}/v1/responses/${unstored.json.id}`)).status, 404);
  a.fault({ kind: 'crash' });
  a.fault({ kind: 'recover' });
  // The crash destroyed the pooled keep-alive socket: the first call may find it dead.
  await fetch(`${a.url}/health`).catch(() => null);
  assert.equal((await postJson(a.url, '/v1/responses', follow)).status, 404);
});

test('/v1/responses streams vLLM\'s event shapes: created first (with the id), text deltas, completed with usage, no [DONE]', async (t) => {
  const r = await replica(t, FAST);
  const s = await streamed(r.url, { instructions: INSTRUCTIONS, input: 'Hi there' });
  assert.equal(s.status, 200);
  const types = s.events.map((e) => e.data.type);
  assert.deepEqual(s.events.map((e) => e.event), types, 'every event is named by its type');
  assert.deepEqual(types.slice(0, 4), ['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added']);
  assert.deepEqual(types.slice(-4), ['response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.completed']);
  const deltas = s.events.filter((e) => e.data.type === 'response.output_text.delta');
  assert.ok(deltas.length > 5);
  for (const d of deltas) assert.ok(d.data.delta.length > 0);
  assert.deepEqual(s.events.map((e) => e.data.sequence_number), s.events.map((_, i) => i));
  const created = s.events[0].data;
  assert.ok(s.raw.startsWith(`event: response.created\ndata: {"response":{"id":"${created.response.id}"`), 'the id comes first in the first event');
  assert.equal(created.response.status, 'in_progress');
  const done = s.events.at(-1)!.data.response;
  assert.equal(done.id, created.response.id);
  assert.equal(done.output[0].content[0].text, deltas.map((d) => d.data.delta).join(''));
  assert.deepEqual(Object.keys(done.usage), ['input_tokens', 'input_tokens_details', 'output_tokens', 'output_tokens_details', 'total_tokens']);
  assert.equal(typeof done.usage.input_tokens_details.cached_tokens, 'number');
  assert.ok(!s.raw.includes('[DONE]'));
  // Streamed and stored: the stream's final object is what GET returns.
  assert.deepEqual(await (await fetch(`${r.url}/v1/responses/${done.id}`)).json(), done);
});

test('/v1/responses tool calls: a function_call item, argument deltas, and a function_call_output continues the conversation', async (t) => {
  const r = await replica(t, FAST);
  const tools = [{ type: 'function', name: 'book_slot', description: 'Book a slot', parameters: { type: 'object', properties: { day: { type: 'string' } } } }];
  const s = await streamed(r.url, { instructions: INSTRUCTIONS, tools, input: 'Please call book_slot for tomorrow.' });
  const types = s.events.map((e) => e.data.type);
  assert.equal(types[2], 'response.output_item.added');
  assert.equal(s.events[2].data.item.type, 'function_call');
  assert.equal(s.events[2].data.item.name, 'book_slot');
  const args = s.events.filter((e) => e.data.type === 'response.function_call_arguments.delta').map((e) => e.data.delta).join('');
  assert.deepEqual(Object.keys(JSON.parse(args)), ['day']);
  const call = s.events.at(-1)!.data.response.output[0];
  assert.equal(call.type, 'function_call');
  assert.equal(call.arguments, args);
  const next = await postJson(r.url, '/v1/responses', {
    model: MODEL, instructions: INSTRUCTIONS, tools, previous_response_id: s.events[0].data.response.id,
    input: [{ type: 'function_call_output', call_id: call.call_id, output: '{"ok":true}' }],
  });
  assert.equal(next.status, 200);
  assert.equal(next.json.output[0].type, 'message', 'after the tool result the agent speaks');
});

test('the official openai SDK runs a conversation against one replica: client.responses.create, streamed and not', async (t) => {
  const r = await replica(t, FAST);
  const client = new OpenAI({ baseURL: `${r.url}/v1`, apiKey: 'sim', maxRetries: 0 });
  const one = await client.responses.create({ model: MODEL, instructions: INSTRUCTIONS, input: 'Hello' });
  assert.ok(one.output_text.length > 0);
  const stream = await client.responses.create({ model: MODEL, instructions: INSTRUCTIONS, input: 'And then?', previous_response_id: one.id, stream: true });
  let textOut = '';
  let completed: OpenAI.Responses.Response | null = null;
  for await (const e of stream) {
    if (e.type === 'response.output_text.delta') textOut += e.delta;
    if (e.type === 'response.completed') completed = e.response;
  }
  assert.ok(completed);
  // The deltas add up to the text of the completed response's message (the SDK sets no output_text on stream events).
  assert.ok(textOut.length > 0, 'text was streamed');
  const message = completed.output[0];
  assert.ok(message?.type === 'message', `a message first: ${JSON.stringify(completed.output)}`);
  const part = message.content[0];
  assert.ok(part?.type === 'output_text', JSON.stringify(message.content));
  assert.equal(part.text, textOut);
  assert.ok(completed.usage!.input_tokens_details.cached_tokens > 0);
  await assert.rejects(
    client.responses.create({ model: MODEL, input: 'x', previous_response_id: 'resp_0000' }),
    (e: unknown) => e instanceof OpenAI.NotFoundError,
  );
});
