import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FAST, postJson, replica, user } from './helpers.js';

test('ignore_eos: the answer runs to its max_tokens (finish_reason length), not its natural length', async (t) => {
  const r = await replica(t, { ...FAST, outputTokens: { min: 5, max: 5 } });
  const natural = await postJson(r.url, '/v1/chat/completions', { messages: user('hello'), max_tokens: 40 });
  assert.equal(natural.json.usage.completion_tokens, 5);
  assert.equal(natural.json.choices[0].finish_reason, 'stop');
  const full = await postJson(r.url, '/v1/chat/completions', { messages: user('hello'), max_tokens: 40, ignore_eos: true });
  assert.equal(full.json.usage.completion_tokens, 40);
  assert.equal(full.json.choices[0].finish_reason, 'length');
  const bad = await postJson(r.url, '/v1/chat/completions', { messages: user('hello'), ignore_eos: 'yes' });
  assert.equal(bad.status, 400);
});
