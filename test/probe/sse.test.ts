import assert from 'node:assert/strict';
import { test } from 'node:test';

import { createSseScanner } from '../../src/probe/sse.js';

const chunk = (delta: unknown, extra: Record<string, unknown> = {}): string =>
  `data: ${JSON.stringify({ object: 'chat.completion.chunk', choices: [{ index: 0, delta }], usage: null, ...extra })}\n\n`;

test('role-only opener is not content; the first non-empty delta.content is', () => {
  const s = createSseScanner();
  assert.equal(s.push(Buffer.from(chunk({ role: 'assistant', content: '' }))), false);
  assert.equal(s.state.contentSeen, false);
  assert.equal(s.push(Buffer.from(chunk({ content: 'Hi' }))), true);
  assert.equal(s.push(Buffer.from(chunk({ content: ' there' }))), false, 'only the first content reports true');
});

test('a tool-call delta counts as first content', () => {
  const s = createSseScanner();
  s.push(Buffer.from(chunk({ role: 'assistant', content: null })));
  assert.equal(s.push(Buffer.from(chunk({ tool_calls: [{ index: 0, function: { name: 'f', arguments: '' } }] }))), true);
});

test('reasoning-only or empty deltas are not content', () => {
  const s = createSseScanner();
  assert.equal(s.push(Buffer.from(chunk({ reasoning_content: 'hmm' }) + chunk({ content: '' }) + chunk({ tool_calls: [] }))), false);
  assert.equal(s.state.events, 3);
});

test('lines split across network chunks, CRLF endings and no space after data:', () => {
  const text = chunk({ role: 'assistant', content: '' }).replace(/\n/g, '\r\n') + `data:${JSON.stringify({ choices: [{ delta: { content: 'x' } }] })}\r\n\r\n`;
  const bytes = Buffer.from(text);
  const s = createSseScanner();
  const hits: number[] = [];
  // Feed three bytes at a time so every boundary (inside "data:", inside JSON, between CR and LF) is hit.
  for (let i = 0; i < bytes.length; i += 3) if (s.push(bytes.subarray(i, i + 3))) hits.push(i);
  assert.equal(hits.length, 1);
  assert.ok(hits[0] >= bytes.length - 8, 'found only once the content line was complete');
});

test('multi-byte UTF-8 split across chunks still parses', () => {
  const bytes = Buffer.from(chunk({ content: '안녕하세요' }));
  const s = createSseScanner();
  let found = false;
  for (let i = 0; i < bytes.length; i += 5) found = s.push(bytes.subarray(i, i + 5)) || found;
  assert.equal(found, true);
});

test('usage after content is recorded, with and without cached_tokens', () => {
  const s = createSseScanner();
  s.push(Buffer.from(chunk({ content: 'a' })));
  s.push(Buffer.from(`data: {"choices":[],"usage":{"prompt_tokens":9001,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":8992}}}\n\ndata: [DONE]\n\n`));
  assert.deepEqual([s.state.promptTokens, s.state.cachedTokens, s.state.done], [9001, 8992, true]);

  const t = createSseScanner();
  t.push(Buffer.from(chunk({ content: 'a' }) + `data: {"choices":[],"usage":{"prompt_tokens":12}}\n\n`));
  assert.deepEqual([t.state.promptTokens, t.state.cachedTokens], [12, null]);
});

test('an error event is captured, before or after content', () => {
  const s = createSseScanner();
  s.push(Buffer.from(`data: {"error":{"message":"replica r2 failed","type":"upstream_error"}}\n\n`));
  assert.equal(s.state.error, 'replica r2 failed');
  assert.equal(s.state.contentSeen, false);

  const t = createSseScanner();
  t.push(Buffer.from(chunk({ content: 'a' }) + `data: {"error":{"message":"mid-stream"}}\n\n`));
  assert.equal(t.state.error, 'mid-stream');
});

test('an event cut off by the end of the stream (no blank line) is not an event, as the SSE spec says', () => {
  const s = createSseScanner();
  assert.equal(s.push(Buffer.from(chunk({ role: 'assistant' }) + `data: {"choices":[{"delta":{"content":"z"}}]}`)), false);
  assert.equal(s.end(), false);
  assert.equal(s.state.contentSeen, false);
});

test('comments, event: lines and junk data are ignored', () => {
  const s = createSseScanner();
  assert.equal(s.push(Buffer.from(`: keep-alive\n\nevent: ping\ndata: not json\n\n`)), false);
  assert.equal(s.state.contentSeen, false);
});
