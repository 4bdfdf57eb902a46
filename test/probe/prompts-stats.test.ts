import assert from 'node:assert/strict';
import { test } from 'node:test';

import { buildMessages, CASES, filler, newNonce } from '../../src/probe/prompts.js';
import { percentile, summarize } from '../../src/probe/stats.js';

const chars = (m: { content: string }[]): number => m.reduce((n, x) => n + x.content.length, 0);

test('prompt sizes track ~4 chars per token', () => {
  for (const id of ['fresh1k', 'cold5k', 'repeat9k'] as const) {
    const n = chars(buildMessages(CASES[id], newNonce()));
    const want = CASES[id].tokens * 4;
    assert.ok(Math.abs(n - want) / want < 0.02, `${id}: ${n} chars for ~${want}`);
  }
  const tiny = chars(buildMessages(CASES.tiny, null));
  assert.ok(tiny >= 80 && tiny <= 160, `tiny is ~30 tokens (${tiny} chars)`);
  const scaled = chars(buildMessages(CASES.repeat9k, newNonce(), 0.1));
  assert.ok(Math.abs(scaled - 3600) < 100, `scale shrinks the prompt (${scaled})`);
});

test('system then user; the nonce opens the prompt so nothing before it can be cached', () => {
  const nonce = newNonce();
  const m = buildMessages(CASES.cold5k, nonce);
  assert.deepEqual(m.map((x) => x.role), ['system', 'user']);
  assert.ok(m[0].content.startsWith(`[${nonce}]`));
  const other = buildMessages(CASES.cold5k, newNonce());
  assert.notEqual(other[0].content.slice(0, 40), m[0].content.slice(0, 40));
  // Apart from the nonce, the same bytes every time (deterministic filler).
  assert.equal(other[0].content.slice(40), m[0].content.slice(40));
});

test('filler is deterministic, varied prose, stable across the order sizes are asked for', () => {
  const small = filler(500);
  const big = filler(50_000);
  assert.ok(big.startsWith(small), 'a small filler is a prefix of a big one');
  assert.equal(filler(500), small);
  const words = big.split(/\s+/);
  assert.ok(new Set(words.map((w) => w.replace(/\W/g, '').toLowerCase())).size > 150, 'many distinct words');
  assert.ok(/^[A-Z][a-z]+ [a-z]+/.test(big), 'reads like sentences');
  assert.ok(!/(.)\1{4}/.test(big), 'no long runs of one character');
});

test('percentile interpolates; summary has median/p90/min/max', () => {
  assert.equal(percentile([10], 0.9), 10);
  assert.equal(percentile([1, 2, 3, 4], 0.5), 2.5);
  assert.equal(percentile([10, 20, 30, 40, 50], 0.9), 46);
  assert.deepEqual(summarize([50, 10, 40, 20, 30]), { n: 5, median: 30, p90: 46, min: 10, max: 50 });
  assert.equal(summarize([]), null);
});
