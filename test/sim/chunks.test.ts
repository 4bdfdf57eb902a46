import assert from 'node:assert/strict';
import { test } from 'node:test';
import OpenAI from 'openai';
import { agent, chat, FAST, postJson, replica, streamRequest, user } from './helpers.js';

const MODEL = 'google/gemma-4-31B-it';

test('a streamed chat completion has vLLM chunk shapes, one token per chunk, usage and [DONE]', async (t) => {
  const r = await replica(t, FAST);
  const res = await chat(r.url, { model: MODEL, messages: user('Tell me about the weather.') });
  assert.equal(res.status, 200);

  // Framing: nothing but `data: <json>\n\n` events, the last one [DONE].
  const events = res.raw.split('\n\n');
  assert.equal(events.pop(), '');
  assert.ok(events.every((e) => e.startsWith('data: ') && !e.includes('\n')));
  assert.equal(events[events.length - 1], 'data: [DONE]');

  const [role, ...rest] = res.chunks as any[];
  assert.match(role.id, /^chatcmpl-[0-9a-f]{16}$/);
  assert.equal(role.object, 'chat.completion.chunk');
  assert.equal(role.model, MODEL);
  assert.ok(Number.isInteger(role.created));
  assert.deepEqual(role.choices, [{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }]);

  const usage = rest.pop();
  assert.deepEqual(usage.choices, []);
  assert.equal(usage.id, role.id);
  const final = rest.pop();
  assert.deepEqual(final.choices[0], {
    index: 0,
    delta: { content: '' },
    logprobs: null,
    finish_reason: 'stop',
    stop_reason: null,
    token_ids: null,
  });
  for (const c of rest) {
    assert.equal(c.id, role.id);
    assert.equal(c.choices[0].finish_reason, null);
    assert.equal(c.choices[0].delta.content.length, 4, 'one ~4-char token per chunk');
  }
  // completion_tokens counts the content tokens plus the end-of-turn token of the final chunk.
  assert.equal(usage.usage.completion_tokens, rest.length + 1);
  assert.ok(usage.usage.completion_tokens >= 20 && usage.usage.completion_tokens <= 60);
  assert.equal(usage.usage.total_tokens, usage.usage.prompt_tokens + usage.usage.completion_tokens);
  // vLLM 0.32's chat usage chunk also counts tokens it wrote to the cache for the client.
  assert.deepEqual(usage.usage.prompt_tokens_details, { cached_tokens: 0, created_cache_tokens: 0 });
});

test('max_tokens ends with finish_reason length, the last token riding in the final chunk', async (t) => {
  const r = await replica(t, FAST);
  const res = await chat(r.url, { messages: user('hello'), max_completion_tokens: 5 });
  const chunks = res.chunks as any[];
  const final = chunks[chunks.length - 2];
  assert.equal(final.choices[0].finish_reason, 'length');
  assert.equal(final.choices[0].delta.content.length, 4);
  assert.equal(res.usage?.completion_tokens, 5);
  assert.equal(res.content.length, 20);
});

test('no usage chunk without stream_options; no prompt_tokens_details when the flag is off', async (t) => {
  const r = await replica(t, FAST);
  const res = await streamRequest(r.url, '/v1/chat/completions', { stream: true, messages: user('hi') }, agent);
  assert.ok(res.done);
  assert.ok((res.chunks as any[]).every((c) => c.choices.length === 1 && c.usage === undefined));

  const off = await replica(t, { ...FAST, enablePromptTokensDetails: false });
  const res2 = await chat(off.url, { messages: user('hi') });
  assert.ok(res2.usage);
  assert.equal(res2.usage.prompt_tokens_details, undefined);
});

test('non-streamed chat and text completions are full vLLM objects', async (t) => {
  const r = await replica(t, FAST);
  const c = await postJson(r.url, '/v1/chat/completions', { messages: user('hi'), max_tokens: 3 });
  assert.equal(c.status, 200);
  assert.equal(c.headers.get('content-type'), 'application/json');
  assert.equal(c.json.object, 'chat.completion');
  assert.match(c.json.id, /^chatcmpl-/);
  assert.equal(c.json.choices[0].message.role, 'assistant');
  assert.equal(c.json.choices[0].message.content.length, 12);
  assert.equal(c.json.choices[0].message.tool_calls, undefined);
  assert.equal(c.json.choices[0].finish_reason, 'length');
  assert.deepEqual(c.json.usage.prompt_tokens_details, { cached_tokens: 0, created_cache_tokens: 0, multimodal_tokens: null });

  const p = await postJson(r.url, '/v1/completions', { prompt: 'Once upon a time' });
  assert.equal(p.json.object, 'text_completion');
  assert.match(p.json.id, /^cmpl-/);
  // vLLM's CompletionRequest defaults max_tokens to 16.
  assert.equal(p.json.usage.completion_tokens, 16);
  assert.equal(p.json.choices[0].finish_reason, 'length');
  assert.equal(p.json.usage.prompt_tokens, 5); // BOS + 4 pieces of 4 chars
});

test('a streamed text completion has text_completion chunks and a usage chunk', async (t) => {
  const r = await replica(t, FAST);
  const res = await streamRequest(
    r.url,
    '/v1/completions',
    { prompt: 'Once upon a time', stream: true, max_tokens: 4, stream_options: { include_usage: true } },
    agent,
  );
  const chunks = res.chunks as any[];
  assert.equal(chunks.length, 5);
  assert.ok(chunks.slice(0, 4).every((c) => c.object === 'text_completion' && c.choices[0].text.length === 4));
  assert.equal(chunks[3].choices[0].finish_reason, 'length');
  assert.deepEqual(chunks[4].choices, []);
  assert.equal(chunks[4].usage.completion_tokens, 4);
  assert.ok(res.done);
});

test('answers are deterministic per seed and prompt', async (t) => {
  const a = await replica(t, { ...FAST, seed: 7 });
  const b = await replica(t, { ...FAST, seed: 7 });
  const c = await replica(t, { ...FAST, seed: 8 });
  const body = { messages: user('same prompt') };
  const [ra, rb, rc] = await Promise.all([chat(a.url, body), chat(b.url, body), chat(c.url, body)]);
  assert.equal(ra.content, rb.content);
  assert.notEqual(ra.content, rc.content);
});

test('the official openai client streams from a replica', async (t) => {
  const r = await replica(t, FAST);
  const client = new OpenAI({ baseURL: `${r.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  const stream = await client.chat.completions.create({
    model: MODEL,
    messages: [{ role: 'user', content: 'Say something.' }],
    stream: true,
    stream_options: { include_usage: true },
    max_tokens: 8,
  });
  let content = '';
  let finish: string | null = null;
  let usage: OpenAI.CompletionUsage | undefined;
  for await (const chunk of stream) {
    content += chunk.choices[0]?.delta?.content ?? '';
    finish = chunk.choices[0]?.finish_reason ?? finish;
    usage = chunk.usage ?? usage;
  }
  assert.equal(content.length, 32);
  assert.equal(finish, 'length');
  assert.equal(usage?.completion_tokens, 8);
  assert.equal(usage?.prompt_tokens_details?.cached_tokens, 0);
});

test('headers go out before the engine runs; the role chunk comes with the first token', async (t) => {
  // A long first step, so that headers sent at once and headers sent with the first token stay
  // far apart even when a busy machine is slow to read them.
  const r = await replica(t, { ...FAST, stepBaseMs: 400 });
  const t0 = performance.now();
  const res = await fetch(`${r.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ stream: true, messages: user('hi'), max_tokens: 3 }),
  });
  const headersAt = performance.now() - t0;
  assert.equal(res.headers.get('content-type'), 'text/event-stream; charset=utf-8');
  const reader = res.body!.getReader();
  const first = new TextDecoder().decode((await reader.read()).value);
  const firstAt = performance.now() - t0;
  await reader.cancel();
  assert.ok(headersAt < 250, `headers after ${headersAt} ms`);
  assert.ok(firstAt >= 395, `first bytes after ${firstAt} ms`);
  // vLLM yields the role chunk and the first content chunk from the same engine output.
  assert.match(first, /"role":"assistant"[\s\S]*\n\ndata: .*"content":"[^"]+"/);
});
