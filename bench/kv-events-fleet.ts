// KV events at fleet scale, for bench/kv-events.ts: the event rate of an H100 replica (from the
// simulator's calibration), the CPU one block event costs from the wire to the residency (decode,
// sequence, medium filter, apply) at the default budget, how many replicas one core follows, bytes
// per block, and the RSS of one process holding the default bounds for 256 replicas with their
// 256 subscribed streams.

import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { encode } from '@msgpack/msgpack';
import { Publisher } from 'zeromq';
import { defaultsOf } from '../src/config/defaults.js';
import { ConfigSchema } from '../src/config/schema.js';
import { encodeSeq } from '../src/fleet/kv-events/decode.js';
import { createStreamSequence } from '../src/fleet/kv-events/sequence.js';
import { createKvSubscriber } from '../src/fleet/kv-events/subscriber.js';
import { createKvResidency } from '../src/routing/kv-residency.js';
import { createPrefixIndex } from '../src/routing/prefix-index.js';
import { H100_CAPACITY, H100_TIMING } from './sim/config.js';
import { VOICE_DEFAULTS } from './sim/voice.js';

const KV = defaultsOf(ConfigSchema.properties.kvEvents);
const ROUTING = defaultsOf(ConfigSchema.properties.routing.properties.options);
const BS = H100_CAPACITY.blockSize;
const MB = 1024 * 1024;

/**
 * Blocks stored per second by one simulated H100 replica.
 * - The seed's load (the calibration's 50 voice sessions): each turn adds the utterance (8–32
 *   tokens) and the answer (20–60) to the session's cached history; a turn takes the think time
 *   (1–3 s) plus the TTFT (~73 ms) plus the answer at ~34 ms a step (the calibrated batch-20 step).
 * - Saturated: every step a full prefill budget, at the calibrated linear prefill rate.
 * Under cache pressure each stored block evicts one: removals double the events.
 */
export function eventRates(): { seed: number; saturated: number } {
  const newTokens = (VOICE_DEFAULTS.userTokens[0] + VOICE_DEFAULTS.userTokens[1]) / 2 + (20 + 60) / 2;
  const turnSeconds = (VOICE_DEFAULTS.thinkMs[0] + VOICE_DEFAULTS.thinkMs[1]) / 2000 + 0.073 + 40 * 0.034;
  const seed = (VOICE_DEFAULTS.sessions * newTokens) / BS / turnSeconds;
  const saturated = 1000 / H100_TIMING.prefillMsPerToken / BS;
  return { seed, saturated };
}

let h = 0x12345678n;
const nextHash = () => (h = (h * 6364136223846793005n + 1442695040888963407n) & 0xffffffffffffffffn);

/** One scheduler step's batch as vLLM publishes it: BlockStored for `stores` new blocks (in chains of 4), BlockRemoved for `removes`. */
function stepBatch(stores: number, removes: bigint[], pool: bigint[]): Uint8Array {
  const events: unknown[] = [];
  for (let i = 0; i < stores; i += 4) {
    const n = Math.min(4, stores - i);
    const hashes = Array.from({ length: n }, nextHash);
    pool.push(...hashes);
    events.push(['BlockStored', hashes, pool.length > n + 1 ? pool[pool.length - n - 1] : null, Array.from({ length: n * BS }, (_, k) => k), BS, null, 'GPU']);
  }
  if (removes.length > 0) events.push(['BlockRemoved', removes, 'GPU']);
  return encode([Date.now() / 1000, events], { useBigInt64: true });
}

/**
 * Blocks stored for `replicas` replicas until the budget is full (the steady state of a busy
 * fleet): prompts of 4K tokens (256 blocks, the pressure presets' agents are 3–6K), each its own chain.
 */
function fill(residency: ReturnType<typeof createKvResidency>, replicas: number): void {
  const perReplica = Math.ceil(KV.maxBlocks / replicas);
  for (let i = 0; i < replicas; i++) {
    let parent: string | null = null;
    for (let b = 0; b < perReplica; b += 64) {
      if (b % 256 === 0) parent = null;
      const hashes = Array.from({ length: 64 }, () => nextHash().toString(16));
      residency.apply(`r${i}`, [{ type: 'stored', hashes, parent, tokenCount: null, blockSize: BS, medium: 'GPU' }], b);
      parent = hashes[63];
    }
  }
}

/**
 * CPU per block event, wire to residency, with the residency full at the default budget (every
 * new block evicts the fleet's least recently used one). Frames are encoded before timing (the
 * publisher's work): per scheduler step 8 new blocks stored and 8 removed, all distinct.
 */
export function cpuPerEvent(replicas = 256, steps = 48, warm = 8): { events: number; usPerEvent: number } {
  const residency = createKvResidency({ maxBlocks: KV.maxBlocks, hooks: { lost: () => undefined, cleared: () => undefined } });
  fill(residency, replicas);
  const seqs = Array.from({ length: replicas }, (_, i) => {
    residency.setLive(`r${i}`, 0, true);
    return createStreamSequence({
      replica: `r${i}`, rank: 0, medium: 'GPU', maxPendingBatches: 100, replay: null,
      observer: { batch: (r, rank, events) => residency.apply(r, events, Date.now(), rank), state: () => undefined, gap: () => undefined, replay: () => undefined, error: () => undefined },
    });
  });
  const frames: Uint8Array[][][] = seqs.map(() => {
    const pool: bigint[] = [];
    return Array.from({ length: steps }, (_, k) => [Buffer.from(''), encodeSeq(BigInt(k)), stepBatch(8, k >= 2 ? pool.splice(0, 8) : [], pool)]);
  });
  // The first steps untimed: the code is compiled by then, as in a gateway that has run a while.
  for (let k = 0; k < warm; k++) for (let i = 0; i < replicas; i++) seqs[i].frame(frames[i][k]);
  let events = 0;
  const t0 = process.cpuUsage();
  for (let k = warm; k < steps; k++) {
    for (let i = 0; i < replicas; i++) {
      seqs[i].frame(frames[i][k]);
      events += 16;
    }
  }
  const used = process.cpuUsage(t0);
  return { events, usPerEvent: (used.user + used.system) / events };
}

const gc = (globalThis as { gc?: () => void }).gc;
function memory(): { heap: number; buffers: number; rss: number } {
  gc?.();
  const m = process.memoryUsage();
  return { heap: m.heapUsed, buffers: m.arrayBuffers, rss: m.rss };
}

/** The default bounds filled for `replicas` replicas: residency at kvEvents.maxBlocks, the prefix index at its default entries, and one live stream each. */
export async function fleetMemory(replicas = 256): Promise<{ bytesPerBlock: number; blocks: number; indexMB: number; rssMB: number; rssBoundsMB: number; baseRssMB: number }> {
  const base = memory();
  const residency = createKvResidency({ maxBlocks: KV.maxBlocks, hooks: { lost: () => undefined, cleared: () => undefined } });
  fill(residency, replicas);
  const withBlocks = memory();
  const index = createPrefixIndex({ maxEntries: ROUTING.prefixMaxEntries, ttlMs: ROUTING.prefixTtlMs });
  for (let e = 0; e < ROUTING.prefixMaxEntries; e += 8) {
    const chain = Array.from({ length: 8 }, (_, k) => nextHash().toString(16).padStart(16, '0').slice(0, 16) + k);
    index.record(chain, chain.map((_, k) => (k + 1) * 100), `r${e % replicas}`, 0);
  }
  const withIndex = memory();
  const rssBounds = process.memoryUsage().rss;
  // 256 publishers here stand for the replicas; the subscribers are what a pod holds.
  const pubs: Publisher[] = [];
  const subs = [];
  for (let i = 0; i < replicas; i++) {
    const pub = new Publisher({ linger: 0 });
    await pub.bind('tcp://127.0.0.1:*');
    pubs.push(pub);
    subs.push(createKvSubscriber({ replica: `r${i}`, endpoint: pub.lastEndpoint as string, replayEndpoint: null, topic: '', medium: 'GPU', replayTimeoutMs: 1000, maxPendingBatches: KV.maxPendingBatches, observer: { batch: () => undefined, state: () => undefined, gap: () => undefined, replay: () => undefined, error: () => undefined } }));
  }
  await new Promise((r) => setTimeout(r, 500));
  const all = memory();
  for (const s of subs) s.close();
  for (const p of pubs) p.close();
  const blocks = residency.size() + (index.size() > 0 ? 0 : 0); // both kept alive up to here
  return {
    bytesPerBlock: (withBlocks.heap + withBlocks.buffers - base.heap - base.buffers) / blocks,
    blocks,
    indexMB: (withIndex.heap + withIndex.buffers - withBlocks.heap - withBlocks.buffers) / MB,
    rssMB: all.rss / MB,
    rssBoundsMB: rssBounds / MB,
    baseRssMB: base.rss / MB,
  };
}

export async function reportFleet(): Promise<void> {
  const rates = eventRates();
  const cpu = cpuPerEvent();
  console.log(`\nKV events at fleet scale (default kvEvents.maxBlocks ${KV.maxBlocks.toLocaleString('en')})`);
  console.log(`block stores per second, one H100 replica: seed's load ${rates.seed.toFixed(0)}, saturated prefill ${rates.saturated.toFixed(0)}; with as many removals under pressure: ${(2 * rates.seed).toFixed(0)} / ${(2 * rates.saturated).toFixed(0)} block events/s`);
  console.log(`decode + sequence + apply, 256 replicas' streams at the default budget: ${cpu.usPerEvent.toFixed(2)} µs CPU per block event (${cpu.events.toLocaleString('en')} events)`);
  const perCore = (rate: number) => Math.floor(1e6 / (cpu.usPerEvent * rate));
  console.log(`one pod core follows: ${perCore(2 * rates.seed).toLocaleString('en')} replicas at the seed's load, ${perCore(2 * rates.saturated).toLocaleString('en')} saturated`);
  // In a process of its own: RSS does not shrink back after the benchmarks above.
  const out = execFileSync(process.execPath, ['--expose-gc', '--import', 'tsx', fileURLToPath(import.meta.url), '--memory'], { encoding: 'utf8' });
  const mem = JSON.parse(out) as Awaited<ReturnType<typeof fleetMemory>>;
  console.log(`memory: ${mem.bytesPerBlock.toFixed(1)} B per block (${mem.blocks.toLocaleString('en')} blocks over 256 replicas), prefix index at its default ${ROUTING.prefixMaxEntries.toLocaleString('en')} entries ${mem.indexMB.toFixed(0)} MB`);
  console.log(`RSS of one process: ${mem.baseRssMB.toFixed(0)} MB at start, ${mem.rssBoundsMB.toFixed(0)} MB with both full, ${mem.rssMB.toFixed(0)} MB with 256 streams subscribed too (and, here, their 256 publishers)`);
}

if (process.argv[1] === fileURLToPath(import.meta.url) && process.argv.includes('--memory')) {
  const mem = await fleetMemory();
  process.stdout.write(JSON.stringify(mem));
  process.exit(0);
}
