// What reading vLLM's KV events costs the gateway, per request and per batch, against the hot
// path it leaves alone: identify + route of a 9K-token chat with a replica's stream live, the
// decode of a real captured frame and of a 9K-token BlockStored batch, applying it, and learning
// the request's engine blocks from it (after the response, off the hot path).
//
//   npm run bench:kv-events [-- --iterations N] [--no-fleet]
//
// Then KV events at fleet scale (bench/kv-events-fleet.ts): CPU per block event at an H100
// replica's event rate, replicas per pod core, bytes per block, RSS at 256 replicas.

import { readFileSync } from 'node:fs';
import { encode } from '@msgpack/msgpack';
import { decodeBatch, decodeFrame } from '../src/fleet/kv-events/decode.js';
import { DEFAULT_IDENTITY_OPTIONS, identify } from '../src/identify/identity.js';
import { createKvResidency } from '../src/routing/kv-residency.js';
import { createRouter } from '../src/routing/router.js';
import type { ReplicaView } from '../src/routing/types.js';
import { createMemorySessionStore } from '../src/store/memory.js';
import { reportFleet } from './kv-events-fleet.js';
import { fmt, percentiles } from './lib/percentiles.js';

const args = process.argv.slice(2);
const at = args.indexOf('--iterations');
const N = at >= 0 ? Number(args[at + 1]) : 5000;

const WORDS = 'account address after agent answer appointment balance bank before bill booking branch call caller card case change check city claim clinic code confirm contact cost customer date delivery desk detail doctor document email evening field form guide help history holiday home hour'.split(' ');
let seed = 7;
const rand = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
const text = (tokens: number) => {
  const out: string[] = [];
  for (let c = 0; c < tokens * 4;) {
    const w = WORDS[Math.floor(rand() * WORDS.length)];
    out.push(w);
    c += w.length + 1;
  }
  return out.join(' ');
};

function measure(name: string, n: number, f: (i: number) => void): [string, ReturnType<typeof percentiles>] {
  for (let i = 0; i < Math.min(500, n); i++) f(i);
  const xs: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = process.hrtime.bigint();
    f(i);
    xs.push(Number(process.hrtime.bigint() - t) / 1000);
  }
  return [name, percentiles(xs)];
}

// A 9K-token chat: a 3K-token system prompt and 19 turns.
const messages: { role: string; content: string }[] = [{ role: 'system', content: text(3000) }];
for (let i = 1; i < 20; i++) messages.push({ role: i % 2 ? 'user' : 'assistant', content: text(316) });
const chat = { model: 'm', messages, stream: true };
const headers = { 'x-session-id': 'call-1' };
const id = identify('chat', chat, headers, DEFAULT_IDENTITY_OPTIONS);

// The same prompt as vLLM would report it stored: 16-token blocks, 64-bit hashes, token ids.
const BS = 16;
const blocks = Math.floor(9000 / BS);
const hashes = Array.from({ length: blocks }, (_, i) => (0x9e3779b97f4a7c15n * BigInt(i + 1)) & 0xffffffffffffffffn);
const tokenIds = Array.from({ length: blocks * BS }, (_, i) => (i * 7919) % 151_000);
const storedPayload = encode([Date.now() / 1000, [{ type: 'BlockStored', block_hashes: hashes, parent_block_hash: null, token_ids: tokenIds, block_size: BS, lora_id: null, medium: 'GPU', lora_name: null }], 0], { useBigInt64: true });
const real = JSON.parse(readFileSync(new URL('../test/fixtures/kv-events/block-stored.json', import.meta.url), 'utf8')).messages[0].frames_hex.map((h: string) => Buffer.from(h, 'hex'));

const replicas: ReplicaView[] = Array.from({ length: 8 }, (_, i) => ({ name: `r${i}`, weight: 1, up: true, draining: false, inflight: i % 3, models: null, waiting: 0, running: i % 3, kvUsage: 0.3, kvCapacityTokens: 500_000 }));
const withEvents = createRouter('affinity', { store: createMemorySessionStore({ maxSessions: 100_000, ttlMs: 600_000 }) });
const without = createRouter('affinity', { store: createMemorySessionStore({ maxSessions: 100_000, ttlMs: 600_000 }) });
for (const r of replicas) withEvents.kvStream(r.name, 'live');
const stored = decodeBatch(storedPayload).events;
withEvents.kvEvents('r3', stored);
const outcome = { replica: 'r3', result: 'ok' as const, replicaTtftMs: 70, promptTokens: 9000, cachedTokens: 8800 };
withEvents.served(id, outcome);
without.served(id, outcome);

const res = createKvResidency({ maxBlocks: 262_144, hooks: { lost: () => undefined, cleared: () => undefined } });
res.setLive('r0', 0, true);
const rows = [
  measure('identify chat 9K tokens / 20 messages', N, () => void identify('chat', chat, headers, DEFAULT_IDENTITY_OPTIONS)),
  measure('route(), 8 replicas, KV events off', N, () => void without.route({ identity: id, replicas })),
  measure('route(), 8 replicas, KV events live', N, () => void withEvents.route({ identity: id, replicas })),
  measure('decode a real vLLM frame (16 blocks × 128 tokens)', N, () => void decodeFrame(real)),
  measure('decode a 9K-token BlockStored batch (562 blocks)', Math.min(N, 2000), () => void decodeBatch(storedPayload)),
  measure('apply that batch + learn the request (off the hot path)', Math.min(N, 2000), (i) => {
    res.reset('r0');
    res.apply('r0', stored, i);
    res.learn('r0', id.chain, id.chainTokens, 9000, 0);
  }),
];

console.log(`bench/kv-events: node ${process.version}, ${N} iterations (decode/apply: ${Math.min(N, 2000)})`);
console.log('case'.padEnd(60) + 'p50 µs'.padStart(10) + 'p90 µs'.padStart(10) + 'p99 µs'.padStart(10));
for (const [name, p] of rows) console.log(name.padEnd(60) + fmt(p.p50, 1).padStart(10) + fmt(p.p90, 1).padStart(10) + fmt(p.p99, 1).padStart(10));
const [off, on] = [rows[1][1], rows[2][1]];
console.log(`\nroute() with KV events live / off (p50): ${(on.p50 / off.p50).toFixed(2)}×`);

if (!args.includes('--no-fleet')) await reportFleet();
