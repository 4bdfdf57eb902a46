// Cost of computing a request's identity (session key + prefix chain) on the gateway's hot path.
//
// Compares, in one run, identify() against the JSON.parse the gateway does anyway for the same
// body, so the hashing cost reads as a fraction of work already paid. Target: a 9K-token,
// 20-message chat well under 0.1 ms (100 µs) at p50 and p99.
//
//   npx tsx bench/hash.ts [--iterations N] [--json out.json]

import { writeFileSync } from 'node:fs';
import { DEFAULT_IDENTITY_OPTIONS, identify } from '../src/identify/identity.js';
import { createPrefixIndex } from '../src/routing/prefix-index.js';
import { createRouter } from '../src/routing/router.js';
import type { ReplicaView } from '../src/routing/types.js';
import { createMemorySessionStore } from '../src/store/memory.js';

const args = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const ITERATIONS = Number(flag('--iterations') ?? 20_000);
const WARMUP = Math.min(5_000, ITERATIONS);

const WORDS = 'account address after agent answer appointment balance bank before bill booking branch call caller card case change check city claim clinic code confirm contact cost customer date delivery desk detail doctor document email evening field form guide help history holiday home hour identity invoice issue key letter line list meeting message minute month morning name note number office order page parcel payment person phone place plan please policy price problem quick reason receipt record refund reply report request return route schedule service session short signal slot station status street summary support system ticket time today transfer travel turn update user visit voice wait week window word year'.split(' ');

let state = 12345;
const rand = (): number => {
  state = (state * 1103515245 + 12345) & 0x7fffffff;
  return state / 0x7fffffff;
};
/** English-like filler of about `tokens` tokens at ~4 chars per token. */
function text(tokens: number): string {
  const out: string[] = [];
  let chars = 0;
  while (chars < tokens * 4) {
    const w = WORDS[Math.floor(rand() * WORDS.length)];
    out.push(w);
    chars += w.length + 1;
  }
  return out.join(' ');
}

/** A voice-agent conversation: ~3K-token system prompt, then 19 turns sharing the remaining ~6K. */
function conversation(totalTokens: number, messages: number): Record<string, unknown> {
  const system = Math.round(totalTokens / 3);
  const per = Math.round((totalTokens - system) / (messages - 1));
  const msgs: unknown[] = [{ role: 'system', content: text(system) }];
  for (let i = 1; i < messages; i++) msgs.push({ role: i % 2 === 1 ? 'user' : 'assistant', content: text(per) });
  return { model: 'google/gemma-3-27b-it', stream: true, messages: msgs, max_tokens: 200, cache_salt: 'tenant-a' };
}

interface Result { name: string; p50: number; p90: number; p99: number; mean: number }

function measure(name: string, fn: () => void): Result {
  for (let i = 0; i < WARMUP; i++) fn();
  const samples = new Float64Array(ITERATIONS);
  for (let i = 0; i < ITERATIONS; i++) {
    const t0 = process.hrtime.bigint();
    fn();
    samples[i] = Number(process.hrtime.bigint() - t0) / 1000;
  }
  samples.sort();
  const at = (q: number): number => samples[Math.min(samples.length - 1, Math.floor(q * samples.length))];
  const mean = samples.reduce((a, b) => a + b, 0) / samples.length;
  return { name, p50: at(0.5), p90: at(0.9), p99: at(0.99), mean };
}

const headers = { 'x-session-id': 'call-7f3a9c' };
const opts = DEFAULT_IDENTITY_OPTIONS;

const chat = conversation(9000, 20);
const chatJson = JSON.stringify(chat);
const completion = { model: 'm', prompt: text(9000) };
const completionIds = { model: 'm', prompt: Array.from({ length: 9000 }, (_, i) => (i * 7919) % 151_000) };

const chatId = identify('chat', chat, headers, opts);
const index = createPrefixIndex({ maxEntries: 640_000, ttlMs: 600_000 });
index.record(chatId.chain, chatId.chainTokens, 'replica-0', 0);
let tick = 0;

// A full affinity decision over 8 replicas for the same request, the session pinned and warm.
const replicas: ReplicaView[] = Array.from({ length: 8 }, (_, i) => ({
  name: `replica-${i}`, weight: 1, up: true, draining: false, inflight: i % 3, models: null,
  waiting: 0, running: i % 3, kvUsage: 0.3, kvCapacityTokens: 500_000,
}));
const router = createRouter('affinity', { store: createMemorySessionStore({ maxSessions: 100_000, ttlMs: 600_000 }) });
const warm = { replica: 'replica-3', result: 'ok' as const, replicaTtftMs: 70, promptTokens: 9000, cachedTokens: 8800 };
router.served(chatId, warm);

const results: Result[] = [
  measure('JSON.parse of the same chat body (reference)', () => void JSON.parse(chatJson)),
  measure('identify chat 9K tokens / 20 messages', () => void identify('chat', chat, headers, opts)),
  measure('identify completion 9K tokens (string, 64-byte links)', () => void identify('completion', completion, headers, opts)),
  measure('identify completion 9K token ids (16-id links)', () => void identify('completion', completionIds, headers, opts)),
  measure('prefix index match, 20 links', () => void index.match(chatId.chain, chatId.chainTokens, 1, 8)),
  measure('prefix index record, 20 links', () => index.record(chatId.chain, chatId.chainTokens, `replica-${tick++ % 4}`, tick)),
  measure('affinity route(), 8 replicas, pinned + warm', () => void router.route({ identity: chatId, replicas })),
  measure('affinity served(), 20 links + cost model', () => router.served(chatId, warm)),
];

console.log(`bench/hash: ${ITERATIONS} iterations after ${WARMUP} warm-up, node ${process.version}`);
console.log(`chat body: ${chatJson.length} bytes, ${chatId.chain.length} links, ~${chatId.promptTokens} tokens estimated`);
console.log('');
console.log('case'.padEnd(58) + 'p50 µs'.padStart(9) + 'p90 µs'.padStart(9) + 'p99 µs'.padStart(9));
for (const r of results) {
  console.log(r.name.padEnd(58) + r.p50.toFixed(1).padStart(9) + r.p90.toFixed(1).padStart(9) + r.p99.toFixed(1).padStart(9));
}
const parse = results[0];
const id = results[1];
console.log('');
console.log(`identify / JSON.parse (p50): ${(id.p50 / parse.p50).toFixed(2)}×; target p99 < 100 µs: ${id.p99 < 100 ? 'met' : 'MISSED'}`);
const out = flag('--json');
if (out !== undefined) writeFileSync(out, JSON.stringify({ iterations: ITERATIONS, node: process.version, results }, null, 2));
