import assert from 'node:assert/strict';
import { test } from 'node:test';
import { chat, FAST, postJson, replica, user } from './helpers.js';

const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      parameters: { type: 'object', properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } } },
    },
  },
  { type: 'function', function: { name: 'book_table', parameters: { type: 'object', properties: { people: { type: 'integer' } } } } },
];

function toolDeltas(chunks: any[]) {
  return chunks.filter((c) => c.choices[0]?.delta?.tool_calls).map((c) => c.choices[0].delta.tool_calls[0]);
}

test('a tool call streams like vLLM: name first, then argument fragments, finish_reason tool_calls', async (t) => {
  const r = await replica(t, FAST);
  const res = await chat(r.url, { messages: user('Please call the weather tool for me.'), tools: TOOLS });
  const chunks = res.chunks as any[];
  assert.deepEqual(chunks[0].choices[0].delta, { role: 'assistant', content: '' });
  const deltas = toolDeltas(chunks);
  const [first, ...fragments] = deltas;
  assert.equal(first.index, 0);
  assert.match(first.id, /^chatcmpl-tool-[0-9a-f]{32}$/);
  assert.equal(first.type, 'function');
  assert.deepEqual(first.function, { name: 'get_weather', arguments: '' });
  assert.ok(fragments.length > 3);
  for (const f of fragments) assert.deepEqual(Object.keys(f).sort(), ['function', 'index']);
  const args = JSON.parse(fragments.map((f) => f.function.arguments).join(''));
  assert.deepEqual(Object.keys(args), ['city', 'unit']);
  assert.equal(args.unit, 'celsius');
  const final = chunks[chunks.length - 2].choices[0];
  assert.equal(final.finish_reason, 'tool_calls');
  assert.deepEqual(final.delta, {});
  assert.equal(res.content, '');
  // Silent tokens: the start marker and the "call:get_weather{" pieces before the one naming it.
  const silent = 1 + Math.ceil('call:get_weather{'.length / 4) - 1;
  assert.equal(res.usage?.completion_tokens, chunks.length - 2 + silent);
});

test('the tool named in the request is called, and a named tool_choice finishes with stop', async (t) => {
  const r = await replica(t, FAST);
  const auto = await chat(r.url, { messages: user('call book_table for two'), tools: TOOLS, tool_choice: 'auto' });
  assert.equal(toolDeltas(auto.chunks)[0].function.name, 'book_table');
  const named = await chat(r.url, {
    messages: user('hello'),
    tools: TOOLS,
    tool_choice: { type: 'function', function: { name: 'book_table' } },
  });
  assert.equal(toolDeltas(named.chunks)[0].function.name, 'book_table');
  assert.equal(named.finishReason, 'stop');
  const required = await chat(r.url, { messages: user('hello'), tools: TOOLS, tool_choice: 'required' });
  assert.equal(toolDeltas(required.chunks)[0].function.name, 'get_weather');
  assert.equal(required.finishReason, 'tool_calls');
});

test('without a request for a tool, or with tool_choice none, the answer is text', async (t) => {
  const r = await replica(t, FAST);
  const plain = await chat(r.url, { messages: user('What is the weather like?'), tools: TOOLS });
  assert.equal(toolDeltas(plain.chunks).length, 0);
  assert.ok(plain.content.length > 0);
  assert.equal(plain.finishReason, 'stop');
  // With a tool parser running, the EOS delta is an empty object.
  assert.deepEqual((plain.chunks[plain.chunks.length - 2] as any).choices[0].delta, {});
  const none = await chat(r.url, { messages: user('call the tool'), tools: TOOLS, tool_choice: 'none' });
  assert.equal(toolDeltas(none.chunks).length, 0);
});

test('a non-streamed tool call returns message.tool_calls', async (t) => {
  const r = await replica(t, FAST);
  const res = await postJson(r.url, '/v1/chat/completions', { messages: user('use the tool please, call it'), tools: TOOLS });
  const choice = res.json.choices[0];
  assert.equal(choice.finish_reason, 'tool_calls');
  assert.equal(choice.message.content, null);
  assert.equal(choice.message.tool_calls.length, 1);
  assert.equal(choice.message.tool_calls[0].type, 'function');
  assert.equal(choice.message.tool_calls[0].function.name, 'get_weather');
  assert.doesNotThrow(() => JSON.parse(choice.message.tool_calls[0].function.arguments));
});

test('a low max_tokens truncates the arguments mid-JSON with finish_reason length', async (t) => {
  const r = await replica(t, FAST);
  const res = await chat(r.url, { messages: user('call the weather tool'), tools: TOOLS, max_tokens: 8 });
  assert.equal(res.finishReason, 'length');
  const args = toolDeltas(res.chunks)
    .slice(1)
    .map((d) => d.function.arguments)
    .join('');
  assert.throws(() => JSON.parse(args));
});

test('a named tool that was not passed is a 400', async (t) => {
  const r = await replica(t, FAST);
  const res = await postJson(r.url, '/v1/chat/completions', {
    messages: user('hi'),
    tools: TOOLS,
    tool_choice: { type: 'function', function: { name: 'nope' } },
  });
  assert.equal(res.status, 400);
  assert.equal(res.json.error.type, 'BadRequestError');
});
