// The body's `model` rewritten for an adapter version (adapters.versions): the byte splice the
// gateway uses (src/edge/body-model.ts) against parsing-free re-encoding of the parsed body
// (JSON.stringify of the object the gateway parsed anyway), on chat bodies of three sizes.
// `npx tsx bench/model-splice.ts`; prints µs per body (median of 7 rounds) and the ratio.

import { withModel } from '../src/edge/body-model.js';

function chatBody(turns: number): Buffer {
  const messages = [{ role: 'system', content: 'You are a helpful support agent. '.repeat(40) }];
  for (let i = 0; i < turns; i++) {
    messages.push({ role: 'user', content: `Question ${i}: how do I reset the "router" on model X-${i}? `.repeat(6) });
    messages.push({ role: 'assistant', content: `Answer ${i}: hold the button for ten seconds, then wait. `.repeat(8) });
  }
  return Buffer.from(JSON.stringify({ model: 'support-agent', stream: true, max_tokens: 256, messages, temperature: 0.2 }));
}

function time(f: () => unknown, n: number): number {
  const t0 = performance.now();
  for (let i = 0; i < n; i++) f();
  return ((performance.now() - t0) * 1000) / n;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

for (const turns of [2, 20, 200]) {
  const body = chatBody(turns);
  const parsed = JSON.parse(body.toString('utf8')) as Record<string, unknown>;
  const n = Math.max(50, Math.round(2_000_000 / body.length));
  const splice: number[] = [];
  const encode: number[] = [];
  for (let round = 0; round < 7; round++) {
    splice.push(time(() => withModel(body, 'support-agent-v4'), n));
    encode.push(time(() => Buffer.from(JSON.stringify({ ...parsed, model: 'support-agent-v4' })), n));
  }
  const s = median(splice);
  const e = median(encode);
  console.log(`${String(body.length).padStart(8)} bytes: splice ${s.toFixed(1)} µs, re-encode ${e.toFixed(1)} µs (${(e / s).toFixed(2)}× the splice)`);
}
