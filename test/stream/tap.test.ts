import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { createTap } from '../../src/stream/tap.js';

const ev = (delta: object, extra = '') => `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":${JSON.stringify(delta)}${extra}}]}\n\n`;
const ROLE = ev({ role: 'assistant', content: '' });
const TOKEN = ev({ content: 'Hi' });
const TOOL = ev({ tool_calls: [{ index: 0, id: 'x', type: 'function', function: { name: 'f', arguments: '' } }] });
const USAGE = 'data: {"id":"c","choices":[],"usage":{"prompt_tokens":120,"total_tokens":130,"completion_tokens":10,"prompt_tokens_details":{"cached_tokens":96}}}\n\n';
const DONE = 'data: [DONE]\n\n';

/** Feeds `text` cut at the given offsets; returns the index of the chunk that carried the first token. */
function feed(text: string, cuts: number[], sse = true) {
  const tap = createTap(sse);
  const bounds = [0, ...cuts, text.length];
  let firstAt = -1;
  for (let i = 0; i + 1 < bounds.length; i++) {
    if (tap.scan(Buffer.from(text.slice(bounds[i], bounds[i + 1]))) && firstAt < 0) firstAt = i;
  }
  tap.end();
  return { tap, firstAt };
}

describe('sse tap', () => {
  const cases: { name: string; text: string; cuts: number[]; firstAt: number }[] = [
    { name: 'the role chunk is not a token; the next content chunk is', text: ROLE + TOKEN, cuts: [ROLE.length], firstAt: 1 },
    { name: 'role and content in one read', text: ROLE + TOKEN, cuts: [], firstAt: 0 },
    { name: 'a marker split across reads', text: ROLE + TOKEN, cuts: [ROLE.length + TOKEN.indexOf('"content"') + 5], firstAt: 1 },
    { name: 'split right after the opening quote of the value', text: ROLE + TOKEN, cuts: [ROLE.length + TOKEN.indexOf('"content":"') + 11], firstAt: 1 },
    { name: 'a tool call is a first token', text: ROLE + TOOL, cuts: [ROLE.length], firstAt: 1 },
    { name: 'an empty tool_calls list is not', text: ROLE + ev({ tool_calls: [] }) + TOKEN, cuts: [ROLE.length, ROLE.length + ev({ tool_calls: [] }).length], firstAt: 2 },
    { name: 'completions text', text: 'data: {"choices":[{"text":"","index":0}]}\n\ndata: {"choices":[{"text":"Hello","index":0}]}\n\n', cuts: [42], firstAt: 1 },
    { name: 'spaces after the colon (a Python json.dumps upstream)', text: 'data: {"choices": [{"delta": {"content": ""}}]}\n\ndata: {"choices": [{"delta": {"content": "x"}}]}\n\n', cuts: [48], firstAt: 1 },
  ];
  for (const c of cases) {
    it(c.name, () => assert.equal(feed(c.text, c.cuts).firstAt, c.firstAt));
  }

  it('reads usage (also when split across reads) and [DONE]', () => {
    const text = ROLE + TOKEN + USAGE + DONE;
    const { tap } = feed(text, [ROLE.length + TOKEN.length + 30]);
    assert.deepEqual(tap.usage, { promptTokens: 120, completionTokens: 10, cachedTokens: 96 });
    assert.equal(tap.done, true);
  });

  it('a [DONE] split across reads is still seen', () => {
    const text = ROLE + TOKEN + DONE;
    assert.equal(feed(text, [text.length - 6]).tap.done, true);
    assert.equal(feed(ROLE + TOKEN, []).tap.done, false);
  });

  it('"usage":null is not usage', () => {
    const { tap } = feed(ROLE + ev({ content: 'a' }, ',"usage":null') + DONE, []);
    assert.equal(tap.usage, null);
  });

  it('Responses API usage: input/output tokens and input_tokens_details.cached_tokens', () => {
    const completed = 'event: response.completed\ndata: {"type":"response.completed","response":{"id":"resp_1","usage":{"input_tokens":900,"input_tokens_details":{"cached_tokens":768},"output_tokens":12,"total_tokens":912}}}\n\n';
    const { tap } = feed('event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":"Hi"}\n\n' + completed, [40]);
    assert.deepEqual(tap.usage, { promptTokens: 900, completionTokens: 12, cachedTokens: 768 });
  });

  it('any split of a stream gives the same first-token position, usage and [DONE] as the whole (random splits)', () => {
    const text = ROLE + ev({ content: '' }) + TOKEN + ev({ content: ' there' }) + USAGE + DONE;
    const tokenEnds = (ROLE + ev({ content: '' })).length + TOKEN.indexOf('"Hi"') + 2;
    fc.assert(fc.property(fc.uniqueArray(fc.integer({ min: 1, max: text.length - 1 }), { maxLength: 12 }), (raw) => {
      const cuts = [...raw].sort((a, b) => a - b);
      const { tap, firstAt } = feed(text, cuts);
      // The chunk that completes the first token's event is the one that carries it.
      const eventEnd = text.indexOf('\n\n', tokenEnds) + 2;
      const want = [0, ...cuts].filter((c) => c < eventEnd).length - 1;
      assert.equal(firstAt, want);
      assert.deepEqual(tap.usage, { promptTokens: 120, completionTokens: 10, cachedTokens: 96 });
      assert.equal(tap.done, true);
    }), { numRuns: 300 });
  });

  it('a non-streaming body has no first token (its first byte follows the whole generation), usage read at the end', () => {
    const body = JSON.stringify({ choices: [{ message: { content: 'x' } }], usage: { prompt_tokens: 5, completion_tokens: 1, prompt_tokens_details: { cached_tokens: 0 } } });
    const { tap, firstAt } = feed(body, [10, 50], false);
    assert.equal(firstAt, -1);
    assert.equal(tap.firstToken, null);
    assert.deepEqual(tap.usage, { promptTokens: 5, completionTokens: 1, cachedTokens: 0 });
  });
});


describe('sse tap: Responses API streams', () => {
  // vLLM's shapes: pydantic dumps each event's fields in declaration order, `type` last.
  const rev = (type: string, fields: object, named = true) => `${named ? `event: ${type}\n` : ''}data: ${JSON.stringify({ ...fields, sequence_number: 0, type })}\n\n`;
  const obj = (status: string, usage: object | null = null) => ({ id: 'resp_abc123', created_at: 1, instructions: 'Say "text": "hi"', output: [], status, text: null, tools: [{ type: 'function', name: 'f' }], usage });
  const stream = (named = true) => [
    rev('response.created', { response: obj('in_progress') }, named),
    rev('response.in_progress', { response: obj('in_progress') }, named),
    rev('response.output_item.added', { item: { id: 'msg_1', content: [], role: 'assistant', status: 'in_progress', type: 'message' }, output_index: 0 }, named),
    rev('response.content_part.added', { content_index: 0, item_id: 'msg_1', output_index: 0, part: { annotations: [], text: '', type: 'output_text' } }, named),
    rev('response.output_text.delta', { content_index: 0, delta: '', item_id: 'msg_1', logprobs: [], output_index: 0 }, named),
    rev('response.output_text.delta', { content_index: 0, delta: 'Hel', item_id: 'msg_1', logprobs: [], output_index: 0 }, named),
    rev('response.output_text.delta', { content_index: 0, delta: 'lo', item_id: 'msg_1', logprobs: [], output_index: 0 }, named),
    rev('response.output_text.done', { content_index: 0, item_id: 'msg_1', logprobs: [], output_index: 0, text: 'Hello' }, named),
    rev('response.completed', { response: obj('completed', { input_tokens: 900, input_tokens_details: { cached_tokens: 768 }, output_tokens: 2, total_tokens: 902 }) }, named),
  ];
  const feedResponses = (parts: string[], cuts?: number[]) => {
    const text = parts.join('');
    const tap = createTap(true, 'responses');
    const bounds = cuts ? [0, ...cuts, text.length] : [0, ...parts.map((_, i) => parts.slice(0, i + 1).join('').length)];
    let firstAt = -1;
    for (let i = 0; i + 1 < bounds.length; i++) if (tap.scan(Buffer.from(text.slice(bounds[i], bounds[i + 1]))) && firstAt < 0) firstAt = i;
    tap.end();
    return { tap, firstAt };
  };

  it('the first token is the first non-empty output_text.delta (not the instructions, the empty part or delta); the id from response.created; usage and the end from response.completed', () => {
    for (const named of [true, false]) {
      const { tap, firstAt } = feedResponses(stream(named));
      assert.equal(firstAt, 5, named ? 'with event: lines' : 'data only');
      assert.equal(tap.responseId, 'resp_abc123');
      assert.deepEqual(tap.usage, { promptTokens: 900, completionTokens: 2, cachedTokens: 768 });
      assert.equal(tap.done, true);
    }
  });

  it('OpenAI\'s order (type first) and a function call: the call\'s item is the first output', () => {
    const oa = (type: string, fields: object) => `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: 0, ...fields })}\n\n`;
    const parts = [
      oa('response.created', { response: { id: 'resp_oa', object: 'response', output: [] } }),
      oa('response.output_item.added', { output_index: 0, item: { id: 'fc_1', type: 'function_call', name: 'book', arguments: '', call_id: 'call_1' } }),
      oa('response.function_call_arguments.delta', { item_id: 'fc_1', output_index: 0, delta: '{"day"' }),
      oa('response.completed', { response: { id: 'resp_oa', usage: { input_tokens: 50, input_tokens_details: { cached_tokens: 0 }, output_tokens: 9 } } }),
    ];
    const { tap, firstAt } = feedResponses(parts);
    assert.equal(firstAt, 1);
    assert.equal(tap.responseId, 'resp_oa');
    assert.deepEqual(tap.usage, { promptTokens: 50, completionTokens: 9, cachedTokens: 0 });
  });

  it('any split gives the same first token, id and usage; a chat tap would only see a token at output_text.done', () => {
    const chatTap = createTap(true);
    let chatFirst = -1;
    stream().forEach((p, i) => { if (chatTap.scan(Buffer.from(p)) && chatFirst < 0) chatFirst = i; });
    assert.equal(chatFirst, 7, 'the chat markers miss the deltas: TTFT would end with the whole answer');
    const text = stream().join('');
    const tokenEvent = stream().slice(0, 6).join('').length;
    fc.assert(fc.property(fc.uniqueArray(fc.integer({ min: 1, max: text.length - 1 }), { maxLength: 12 }), (raw) => {
      const cuts = [...raw].sort((a, b) => a - b);
      const { tap, firstAt } = feedResponses([text], cuts);
      assert.equal(firstAt, [0, ...cuts].filter((c) => c < tokenEvent).length - 1);
      assert.equal(tap.responseId, 'resp_abc123');
      assert.equal(tap.usage?.cachedTokens, 768);
    }), { numRuns: 200 });
  });

  it('a stream cut before response.completed: no usage, not done, the id still known', () => {
    const { tap } = feedResponses(stream().slice(0, 7));
    assert.equal(tap.responseId, 'resp_abc123');
    assert.equal(tap.usage, null);
    assert.equal(tap.done, false);
  });

  it('a JSON response object: its leading id (split in tiny chunks), usage from its end; not read for other routes', () => {
    const body = JSON.stringify({ id: 'resp_json1', object: 'response', output: [{ type: 'message', content: [{ type: 'output_text', text: 'x' }] }], usage: { input_tokens: 40, input_tokens_details: { cached_tokens: 32 }, output_tokens: 3 }, user: null });
    const tap = createTap(false, 'responses');
    for (let i = 0; i < body.length; i += 3) tap.scan(Buffer.from(body.slice(i, i + 3)));
    tap.end();
    assert.equal(tap.responseId, 'resp_json1');
    assert.deepEqual(tap.usage, { promptTokens: 40, completionTokens: 3, cachedTokens: 32 });
    const chat = createTap(false);
    chat.scan(Buffer.from(body));
    chat.end();
    assert.equal(chat.responseId, null);
    const error = createTap(false, 'responses');
    error.scan(Buffer.from('{"error":{"message":"x","id":"nope"}}'));
    error.end();
    assert.equal(error.responseId, null);
  });
});

describe('sse tap: what the first token was (issue 17 #8)', () => {
  const chunk = (delta: object) => `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: null }] })}\n\n`;
  const role = chunk({ role: 'assistant', content: '' });
  const cases: [string, string, string][] = [
    ['reasoning_content', role + chunk({ reasoning_content: 'Hmm' }) + chunk({ content: 'Hi' }), 'reasoning'],
    ['reasoning (vLLM\'s newer field)', role + chunk({ reasoning: 'Hmm' }) + chunk({ content: 'Hi' }), 'reasoning'],
    ['a tool call', role + chunk({ tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'f', arguments: '' } }] }), 'tool_call'],
    ['content', role + chunk({ reasoning_content: '' }) + chunk({ content: 'Hi' }), 'content'],
  ];
  for (const [name, text, want] of cases) {
    it(`${name} → ${want}, on the chunk that carries it`, () => {
      const events = text.split('\n\n').filter(Boolean).map((e) => `${e}\n\n`);
      const cuts = events.slice(0, -1).reduce<number[]>((acc, e) => [...acc, (acc.at(-1) ?? 0) + e.length], []);
      const { tap, firstAt } = feed(text, cuts);
      assert.equal(tap.firstToken, want);
      assert.equal(firstAt, want === 'tool_call' ? 1 : name === 'content' ? 2 : 1);
    });
  }
  it('a Responses API reasoning delta is a reasoning first token', () => {
    const tap = createTap(true, 'responses');
    assert.equal(tap.scan(Buffer.from('event: response.reasoning_text.delta\ndata: {"delta":"Hmm","type":"response.reasoning_text.delta"}\n\n')), true);
    assert.equal(tap.firstToken, 'reasoning');
  });
});
