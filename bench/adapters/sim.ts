// npm run bench:adapters -- [--replicas 8] [--adapters 32] [--max-loras 4] [--max-cpu-loras 8]
//   [--sessions 192] [--turns 6] [--zipf 1] [--seeds 1,2] [--strategies affinity,round-robin,session-hash,oracle]
// A fleet of LoRA adapters in the simulator, in virtual time (bench:scale's discrete-event run:
// the router's own code, the simulator's engine with its LoRA slots, no sockets): voice sessions,
// each of one adapter (its own agent, i.e. system prompt), adapters of Zipf popularity, against
// warmroute, round-robin, session hash and an adapter-grouping oracle that knows every adapter's
// traffic in advance (each adapter on as few replicas as its load needs, at most max-loras
// adapters a replica, the busiest spread first). Per strategy: TTFT p50/p90 (virtual ms) and
// the p90's ratio to the oracle's, the prefix hit rate against the ideal (bench/voice/ideal.ts),
// the busiest replica's requests against the mean, and how many adapters each replica served.
// Writes bench/out/adapters-sim.json.

import { mkdirSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { runDes, type DesStrategy } from '../scale/des/run.js';
import { idealHits } from '../voice/ideal.js';
import { buildWorkload, WORKLOAD_DEFAULTS, type Workload } from '../voice/workload.js';
import { mulberry32 } from '../../src/prng.js';

const s = { type: 'string' } as const;
const { values: a } = parseArgs({ options: { replicas: s, adapters: s, 'max-loras': s, 'max-cpu-loras': s, sessions: s, turns: s, zipf: s, seeds: s, strategies: s, 'lora-load-ms': s } });
const num = (v: string | undefined, def: number) => (v === undefined ? def : Number(v));
const R = num(a.replicas, 8);
const A = num(a.adapters, 32);
const maxLoras = num(a['max-loras'], 4);
const maxCpuLoras = num(a['max-cpu-loras'], 8);
const sessions = num(a.sessions, 192);
const turns = num(a.turns, 6);
const zipf = num(a.zipf, 1);
const loadMs = num(a['lora-load-ms'], 50);
const strategies = (a.strategies ?? 'affinity,round-robin,session-hash,oracle').split(',') as DesStrategy[];
const adapters = Array.from({ length: A }, (_, i) => `adapter-${i}`);

/** Each session's adapter, drawn by Zipf popularity (rank k weighs 1 / (k+1)^s). */
function zipfAssign(w: Workload, seed: number): void {
  const weights = adapters.map((_, k) => 1 / (k + 1) ** zipf);
  const total = weights.reduce((x, y) => x + y, 0);
  const rnd = mulberry32(seed * 977 + 3);
  for (const plan of w.sessions) {
    let x = rnd() * total;
    let k = 0;
    while ((x -= weights[k]) > 0 && k < A - 1) k++;
    plan.group = k;
  }
}

/**
 * The adapter-grouping oracle: every adapter's session count known in advance; busiest first,
 * each adapter split over ceil(count / fair share) replicas, each part on the replica with the
 * fewest sessions among those holding fewer than max-loras adapters; its sessions dealt in turn.
 */
function oraclePlan(w: Workload): (session: number) => number {
  const counts = new Array<number>(A).fill(0);
  for (const p of w.sessions) counts[p.group]++;
  const fair = w.sessions.length / R;
  const load = new Array<number>(R).fill(0);
  const held = new Array<number>(R).fill(0);
  const homes = new Map<number, number[]>();
  for (const k of [...counts.keys()].sort((x, y) => counts[y] - counts[x])) {
    if (counts[k] === 0) continue;
    const parts = Math.max(1, Math.ceil(counts[k] / fair));
    const mine: number[] = [];
    for (let p = 0; p < parts; p++) {
      const open = [...load.keys()].filter((r) => held[r] < maxLoras && !mine.includes(r));
      const pool = open.length > 0 ? open : [...load.keys()].filter((r) => !mine.includes(r));
      const r = pool.sort((x, y) => load[x] - load[y])[0];
      mine.push(r);
      held[r]++;
      load[r] += counts[k] / parts;
    }
    homes.set(k, mine);
  }
  const dealt = new Map<number, number>();
  const place = w.sessions.map((p) => {
    const mine = homes.get(p.group)!;
    const n = dealt.get(p.group) ?? 0;
    dealt.set(p.group, n + 1);
    return mine[n % mine.length];
  });
  return (si) => place[si];
}

const pct = (xs: number[], q: number) => xs[Math.min(xs.length - 1, Math.floor(xs.length * q))];
const out: Record<string, unknown>[] = [];
console.log(`${R} replicas × ${A} adapters (Zipf s=${zipf}), --max-loras ${maxLoras}, --max-cpu-loras ${maxCpuLoras}; ${sessions} sessions × ${turns} turns`);
for (const seed of (a.seeds ?? '1,2').split(',').map(Number)) {
  const workload = buildWorkload({ ...WORKLOAD_DEFAULTS, sessions, turns, groups: A, systemTokens: [1000, 2000], seed });
  zipfAssign(workload, seed);
  const place = oraclePlan(workload);
  const rows = strategies.map((strategy) => {
    const t0 = performance.now();
    const run = runDes({
      replicas: R, pods: 1, strategy, workload, kvBlocks: 24_576, outputTokens: [50, 150], gatewayMs: 1, statsIntervalMs: 1_000, maxVirtualMs: 3_600_000, seed,
      lora: { adapters, maxLoras, maxCpuLoras, loadMs }, modelOf: (si) => adapters[workload.sessions[si].group], oraclePlace: place,
    });
    const ttft = run.records.map((r) => r.ttftMs ?? Infinity).sort((x, y) => x - y);
    const perReplica = new Map<string, number>();
    const mix = new Map<string, Set<number>>();
    for (const r of run.records) {
      perReplica.set(r.replica, (perReplica.get(r.replica) ?? 0) + 1);
      if (!mix.has(r.replica)) mix.set(r.replica, new Set());
      mix.get(r.replica)!.add(workload.sessions[r.session].group);
    }
    const adaptersPerReplica = [...mix.keys()].sort().map((k) => mix.get(k)!.size);
    const loads = [...Array(R).keys()].map((i) => perReplica.get(`sim-${i}`) ?? perReplica.get([...perReplica.keys()][i]) ?? 0);
    const mean = run.records.length / R;
    const hit = run.hits / Math.max(1, run.queries);
    const ideal = idealHits(run.sent).hitRate;
    return { seed, strategy, requests: run.records.length, errors: run.records.filter((r) => !r.ok).length, p50: pct(ttft, 0.5), p90: pct(ttft, 0.9), hit, ideal, maxOverMean: Math.max(...perReplica.values()) / mean, truncated: run.truncated, wallMs: Math.round(performance.now() - t0), loads, adaptersPerReplica };
  });
  const oracle = rows.find((r) => r.strategy === 'oracle');
  console.log(`\nseed ${seed}\n| strategy | TTFT p50 | TTFT p90 | p90 / oracle | hit rate | of ideal | busiest replica / mean | errors | adapters served per replica |\n|---|---:|---:|---:|---:|---:|---:|---:|---|`);
  for (const r of rows) {
    const name = r.strategy === 'affinity' ? 'warmroute' : r.strategy === 'oracle' ? 'adapter-grouping oracle' : r.strategy;
    console.log(`| ${name} | ${r.p50.toFixed(0)} ms | ${r.p90.toFixed(0)} ms | ${oracle ? (r.p90 / oracle.p90).toFixed(2) : '—'}× | ${(r.hit * 100).toFixed(1)}% | ${((r.hit / r.ideal) * 100).toFixed(1)}% | ${r.maxOverMean.toFixed(2)} | ${r.errors} | ${r.adaptersPerReplica.join(' ')} |`);
    out.push({ ...r, p90OverOracle: oracle ? r.p90 / oracle.p90 : null });
  }
}
mkdirSync('bench/out', { recursive: true });
writeFileSync('bench/out/adapters-sim.json', JSON.stringify({ replicas: R, adapters: A, maxLoras, maxCpuLoras, sessions, turns, zipf, loadMs, at: new Date().toISOString(), rows: out }, null, 2));
