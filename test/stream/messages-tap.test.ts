import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createTap } from '../../src/stream/tap.js';
import { toolCallEndOfMessagesBody } from '../../src/stream/messages-tool-calls.js';

const ev = (type: string, data: Record<string, unknown>) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
const start = ev('message_start', { message: { id: 'chatcmpl-abc', content: [], model: 'm', stop_reason: null, stop_sequence: null, usage: { input_tokens: 40, output_tokens: 0 } } });
const blockStart = (index: number, block: Record<string, unknown>) => ev('content_block_start', { content_block: block, index });
const delta = (index: number, d: Record<string, unknown>) => ev('content_block_delta', { delta: d, index });
const blockStop = (index: number) => ev('content_block_stop', { index });
const end = (stop: string, usage: Record<string, unknown> = { input_tokens: 40, output_tokens: 9 }) =>
  ev('message_delta', { delta: { stop_reason: stop }, usage }) + ev('message_stop', {});

/** Feeds the events one by one; returns the index of the chunk that carried the first token. */
function feed(tap: ReturnType<typeof createTap>, chunks: string[]): number {
  let at = -1;
  chunks.forEach((c, i) => { if (tap.scan(Buffer.from(c)) && at < 0) at = i; });
  tap.end();
  return at;
}

describe('tap: Anthropic Messages streams', () => {
  it('the first token is the first content delta of any kind: thinking, text, or a tool call\'s input', () => {
    const cases: [string, string[], number][] = [
      ['reasoning', [start, blockStart(0, { type: 'thinking', thinking: '' }), delta(0, { type: 'thinking_delta', thinking: 'Hmm' }), delta(0, { type: 'signature_delta', signature: 'x' }), blockStop(0), end('end_turn')], 2],
      ['content', [start, blockStart(0, { type: 'text', text: '' }), delta(0, { type: 'text_delta', text: '' }), delta(0, { type: 'text_delta', text: 'Hi' }), blockStop(0), end('end_turn')], 3],
      ['tool_call', [start, blockStart(0, { type: 'tool_use', id: 't1', name: 'f', input: {} }), delta(0, { type: 'input_json_delta', partial_json: '{"a": 1}' }), blockStop(0), end('tool_use')], 2],
    ];
    for (const [kind, chunks, at] of cases) {
      const tap = createTap(true, 'messages');
      assert.equal(feed(tap, chunks), at, kind);
      assert.equal(tap.firstToken, kind);
      assert.equal(tap.done, true, 'message_stop ends it');
    }
  });

  it('reads the usage of message_delta, with cache_read_input_tokens when the replica reports it; without message_stop it is not done', () => {
    const tap = createTap(true, 'messages');
    feed(tap, [start, blockStart(0, { type: 'text', text: '' }), delta(0, { type: 'text_delta', text: 'Hi' }), blockStop(0), end('end_turn', { input_tokens: 40, output_tokens: 9, cache_read_input_tokens: 32 })]);
    assert.deepEqual(tap.usage, { promptTokens: 40, completionTokens: 9, cachedTokens: 32 });
    const cut = createTap(true, 'messages');
    feed(cut, [start, blockStart(0, { type: 'text', text: '' }), delta(0, { type: 'text_delta', text: 'Hi' })]);
    assert.equal(cut.done, false);
    assert.equal(cut.firstToken, 'content');
  });

  it('a tool_use block being written when max_tokens stopped the answer is a cut call; a whole one, or text after it, is not', () => {
    const tool = (args: string[], stop: string, after: string[] = []) => {
      const tap = createTap(true, 'messages', 'offered');
      // Split mid-event too: the tap reassembles events across reads.
      const text = [start, blockStart(0, { type: 'tool_use', id: 't1', name: 'f', input: {} }), ...args.map((a) => delta(0, { type: 'input_json_delta', partial_json: a })), ...after, blockStop(0), end(stop)].join('');
      feed(tap, [text.slice(0, 101), text.slice(101)]);
      return tap.toolCall;
    };
    assert.deepEqual(tool(['{"city": "Pa'], 'max_tokens'), { truncated: true, responseId: 'chatcmpl-abc' });
    assert.equal(tool(['{"city": ', '"Paris"}'], 'max_tokens')?.truncated, false);
    assert.equal(tool(['{"city": "Pa'], 'tool_use')?.truncated, false);
    assert.equal(tool([], 'max_tokens')?.truncated, true, 'cut before its first argument byte');
    const textLast = createTap(true, 'messages', 'offered');
    feed(textLast, [start, blockStart(0, { type: 'tool_use', id: 't1', name: 'f', input: {} }), delta(0, { type: 'input_json_delta', partial_json: '{"a": 1}' }), blockStop(0), blockStart(1, { type: 'text', text: '' }), delta(1, { type: 'text_delta', text: 'so' }), blockStop(1), end('max_tokens')]);
    assert.equal(textLast.toolCall?.truncated, false);
    const forced = createTap(true, 'messages', 'forced');
    feed(forced, [start, blockStart(0, { type: 'text', text: '' }), delta(0, { type: 'text_delta', text: '<tool' }), blockStop(0), end('max_tokens')]);
    assert.equal(forced.toolCall?.truncated, true, 'a forced call that ran out of tokens was cut whatever came out');
    const none = createTap(true, 'messages');
    feed(none, [start, blockStart(0, { type: 'tool_use', id: 't1', name: 'f', input: {} }), end('max_tokens')]);
    assert.equal(none.toolCall, null, 'no tools offered: not checked');
  });

  it('a whole message: usage from its tail, a tool_use last on max_tokens is a cut call', () => {
    const body = (content: unknown[], stop: string) => JSON.stringify({ id: 'chatcmpl-x', type: 'message', role: 'assistant', content, model: 'm', stop_reason: stop, usage: { input_tokens: 12, output_tokens: 5 } });
    const tap = createTap(false, 'messages', 'offered');
    const text = body([{ type: 'tool_use', id: 't', name: 'f', input: {} }], 'max_tokens');
    feed(tap, [text.slice(0, 30), text.slice(30)]);
    assert.deepEqual(tap.toolCall, { truncated: true, responseId: 'chatcmpl-x' });
    assert.deepEqual(tap.usage, { promptTokens: 12, completionTokens: 5, cachedTokens: null });
    assert.equal(toolCallEndOfMessagesBody(body([{ type: 'text', text: 'hi' }], 'max_tokens')).truncated, false);
    assert.equal(toolCallEndOfMessagesBody(body([{ type: 'tool_use', id: 't', name: 'f', input: {} }], 'tool_use')).truncated, false);
    assert.equal(toolCallEndOfMessagesBody(body([{ type: 'text', text: 'hi' }], 'max_tokens'), 'forced').truncated, true);
  });
});
