// The simulated adapter fleet of `npm run bench:adapters` as a function (sim.ts prints it; the
// tests hold warmroute to its goals on it): voice sessions, each of one adapter (its own agent,
// i.e. system prompt), adapters of Zipf popularity, through the router's own code and the
// simulator's engine with its LoRA slots, in virtual time (bench:scale's discrete-event run).

import { runDes, type DesStrategy } from '../scale/des/run.js';
import { idealHits } from '../voice/ideal.js';
import { buildWorkload, WORKLOAD_DEFAULTS, type Workload } from '../voice/workload.js';
import { mulberry32 } from '../../src/prng.js';

export interface AdapterSimOptions {
  replicas: number;
  adapters: number;
  maxLoras: number;
  maxCpuLoras: number;
  sessions: number;
  turns: number;
  /** Zipf exponent s: rank k weighs 1 / (k+1)^s. */
  zipf: number;
  /** Virtual ms to load an adapter not kept on the host. */
  loadMs: number;
  /** The sessions' first turns start within this many virtual ms (the workload's default: a 2-s burst). */
  startSpreadMs: number;
  /** Gateway pods sharing one store (the Redis activity channel in virtual time); each request to one at random. */
  pods: number;
  /** How often each pod scrapes each replica (its slots, its queue): the gateway's health.statsIntervalMs. */
  statsMs: number;
}

export const ADAPTER_SIM_DEFAULTS: AdapterSimOptions = Object.freeze({ replicas: 8, adapters: 32, maxLoras: 4, maxCpuLoras: 8, sessions: 192, turns: 6, zipf: 1, loadMs: 50, startSpreadMs: WORKLOAD_DEFAULTS.startSpreadMs, pods: 1, statsMs: 1_000 });

/**
 * The simulator's strategies, and the adapter-grouping plan made from the adapters' popularity (the
 * Zipf weights, as a router with a perfect record of past traffic would know them) rather than from
 * this run's session counts: what balance a plan can reach without knowing the run in advance.
 */
export const ADAPTER_SIM_STRATEGIES = ['affinity', 'round-robin', 'session-hash', 'oracle', 'popularity-oracle'] as const satisfies readonly (DesStrategy | 'popularity-oracle')[];
export type AdapterSimStrategy = (typeof ADAPTER_SIM_STRATEGIES)[number];

export interface AdapterSimRow {
  seed: number;
  strategy: AdapterSimStrategy;
  requests: number;
  errors: number;
  p50: number;
  p90: number;
  hit: number;
  ideal: number;
  /** The busiest replica's requests over the mean. */
  maxOverMean: number;
  truncated: boolean;
  wallMs: number;
  /** How many adapters each replica served (by replica name). */
  adaptersPerReplica: number[];
}

const names = (n: number) => Array.from({ length: n }, (_, i) => `adapter-${i}`);

/** Each adapter's Zipf weight (unnormalised). */
const zipfWeights = (o: AdapterSimOptions) => names(o.adapters).map((_, k) => 1 / (k + 1) ** o.zipf);

/** Each session's adapter, drawn by Zipf popularity. */
function zipfAssign(w: Workload, o: AdapterSimOptions, seed: number): void {
  const weights = zipfWeights(o);
  const total = weights.reduce((x, y) => x + y, 0);
  const rnd = mulberry32(seed * 977 + 3);
  for (const plan of w.sessions) {
    let x = rnd() * total;
    let k = 0;
    while ((x -= weights[k]) > 0 && k < o.adapters - 1) k++;
    plan.group = k;
  }
}

/** Each adapter's session count in this run. */
function sessionCounts(w: Workload, o: AdapterSimOptions): number[] {
  const counts = new Array<number>(o.adapters).fill(0);
  for (const p of w.sessions) counts[p.group]++;
  return counts;
}

/** Each adapter's expected session count: its popularity times the run's sessions. */
function expectedCounts(w: Workload, o: AdapterSimOptions): number[] {
  const weights = zipfWeights(o);
  const total = weights.reduce((x, y) => x + y, 0);
  return weights.map((x) => (x / total) * w.sessions.length);
}

/**
 * The adapter-grouping oracle: every adapter's session count known in advance (`counts`); busiest
 * first, each adapter split over ceil(count / fair share) replicas, each part on the replica with
 * the fewest sessions among those holding fewer than max-loras adapters; its sessions dealt in turn.
 */
function oraclePlan(w: Workload, o: AdapterSimOptions, counts: readonly number[]): (session: number) => number {
  const fair = w.sessions.length / o.replicas;
  const load = new Array<number>(o.replicas).fill(0);
  const held = new Array<number>(o.replicas).fill(0);
  const homes = new Map<number, number[]>();
  for (const k of [...counts.keys()].sort((x, y) => counts[y] - counts[x])) {
    if (counts[k] === 0) continue;
    const parts = Math.max(1, Math.ceil(counts[k] / fair));
    const mine: number[] = [];
    for (let p = 0; p < parts; p++) {
      const open = [...load.keys()].filter((r) => held[r] < o.maxLoras && !mine.includes(r));
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

/** One seed's workload through each strategy. */
export function runAdapterSim(o: AdapterSimOptions, seed: number, strategies: readonly AdapterSimStrategy[]): AdapterSimRow[] {
  const adapters = names(o.adapters);
  const workload = buildWorkload({ ...WORKLOAD_DEFAULTS, sessions: o.sessions, turns: o.turns, groups: o.adapters, systemTokens: [1000, 2000], startSpreadMs: o.startSpreadMs, seed });
  zipfAssign(workload, o, seed);
  const byCounts = oraclePlan(workload, o, sessionCounts(workload, o));
  const byPopularity = oraclePlan(workload, o, expectedCounts(workload, o));
  return strategies.map((strategy) => {
    const t0 = performance.now();
    const popular = strategy === 'popularity-oracle';
    const run = runDes({
      replicas: o.replicas, pods: o.pods, strategy: popular ? 'oracle' : strategy, workload, kvBlocks: 24_576, outputTokens: [50, 150], gatewayMs: 1, statsIntervalMs: o.statsMs, maxVirtualMs: 3_600_000, seed,
      lora: { adapters, maxLoras: o.maxLoras, maxCpuLoras: o.maxCpuLoras, loadMs: o.loadMs }, modelOf: (si) => adapters[workload.sessions[si].group], oraclePlace: popular ? byPopularity : byCounts,
    });
    const ttft = run.records.map((r) => r.ttftMs ?? Infinity).sort((x, y) => x - y);
    const perReplica = new Map<string, number>();
    const mix = new Map<string, Set<number>>();
    for (const r of run.records) {
      perReplica.set(r.replica, (perReplica.get(r.replica) ?? 0) + 1);
      if (!mix.has(r.replica)) mix.set(r.replica, new Set());
      mix.get(r.replica)!.add(workload.sessions[r.session].group);
    }
    const hit = run.hits / Math.max(1, run.queries);
    return {
      seed, strategy, requests: run.records.length, errors: run.records.filter((r) => !r.ok).length, p50: pct(ttft, 0.5), p90: pct(ttft, 0.9),
      hit, ideal: idealHits(run.sent).hitRate, maxOverMean: Math.max(...perReplica.values()) / (run.records.length / o.replicas),
      truncated: run.truncated, wallMs: Math.round(performance.now() - t0), adaptersPerReplica: [...mix.keys()].sort().map((k) => mix.get(k)!.size),
    };
  });
}
