// One benchmark run: a fleet, then for each strategy a fresh gateway over the same fleet with its
// caches reset, the same workload, the figures. Shared by `npm run bench:voice` and `npm run demo`.

import { cpus } from 'node:os';
import { startGateway, gatewayMetrics, sampleInflight, startSimFleet, type Fleet, type Gateway } from './fleet.js';
import { checkGoals, type Goal } from './goals.js';
import { idealHits } from './ideal.js';
import { plannedRequests, runStrategy, type TurnRecord } from './run.js';
import { summarize, type StrategySummary } from './summary.js';
import { warmReplicas } from './warmup.js';
import { buildWorkload, type WorkloadOptions } from './workload.js';

export const STRATEGIES = ['round-robin', 'least-loaded', 'session-hash', 'affinity'] as const;

export interface BenchOptions {
  workload: Partial<WorkloadOptions>;
  replicas: number;
  strategies: readonly string[];
  /** The simulator's natural answer length in tokens (`--output-tokens`). */
  outputTokens: [number, number];
  /** KV blocks per replica (16 tokens each); undefined = the simulator's H100 default (24,576). */
  kvBlocks?: number;
  /** Cap per strategy: no new turn starts after it. */
  maxDurationS: number;
  requestTimeoutS: number;
  budgetMs: number;
  /** Send every agent's system prompt to every replica before the sessions (the report's deploy warmup). */
  warmup: boolean;
}

export interface BenchResult {
  kind: 'warmroute-voice-bench';
  when: string;
  machine: { cpus: number; cpu: string; node: string };
  params: BenchOptions & { workload: WorkloadOptions; plannedRequests: number };
  summaries: StrategySummary[];
  goals: Goal[];
  records: TurnRecord[];
  wallMs: number;
}

export type Progress = (line: string) => void;

export async function runBench(o: BenchOptions, progress: Progress): Promise<BenchResult> {
  const t0 = performance.now();
  const workload = buildWorkload(o.workload);
  const planned = plannedRequests(workload);
  const summaries: StrategySummary[] = [];
  const records: TurnRecord[] = [];
  let fleet: Fleet | null = null;
  let gw: Gateway | null = null;
  try {
    progress(`starting ${o.replicas} simulated vLLM replicas`);
    fleet = await startSimFleet(o.replicas, o.outputTokens, o.kvBlocks);
    for (const [k, strategy] of o.strategies.entries()) {
      const tag = `[${k + 1}/${o.strategies.length} ${strategy}]`;
      progress(`${tag} starting the gateway`);
      gw = await startGateway(fleet.urls, strategy);
      await fleet.reset();
      if (o.warmup) progress(`${tag} warming every replica with every agent's system prompt`);
      const warm = o.warmup ? await warmReplicas(fleet.urls, workload, o.requestTimeoutS * 1000) : [];
      const before = await fleet.prefixCounters();
      const sampler = sampleInflight(gw.adminUrl, 250, o.maxDurationS * 1000 + o.requestTimeoutS * 1000);
      const run = await runStrategy({
        url: gw.url, strategy, workload,
        maxDurationMs: o.maxDurationS * 1000,
        requestTimeoutMs: o.requestTimeoutS * 1000,
        onProgress: (p) => progress(`${tag} ${p.done}/${p.total} requests, ${p.inflight} in flight, ${(p.elapsedMs / 1000).toFixed(0)} s`),
      });
      const inflight = await sampler.stop();
      const gateway = await gatewayMetrics(gw.adminUrl);
      const after = await fleet.prefixCounters();
      await gw.stop();
      gw = null;
      const ideal = idealHits(run.sent.filter((_, i) => run.records[i].ok), warm);
      run.records.filter((r) => r.ok).forEach((r, i) => { r.idealCachedTokens = ideal.cached[i]; });
      records.push(...run.records);
      summaries.push(summarize({
        strategy, records: run.records, durationMs: run.durationMs, truncated: run.truncated, replicas: o.replicas,
        budgetMs: o.budgetMs, counters: { queries: after.queries - before.queries, hits: after.hits - before.hits },
        gateway, inflight,
      }));
    }
  } finally {
    await gw?.stop();
    await fleet?.stop();
  }
  return {
    kind: 'warmroute-voice-bench',
    when: new Date().toISOString(),
    machine: { cpus: cpus().length, cpu: cpus()[0]?.model ?? '?', node: process.version },
    params: { ...o, workload: workload.options, plannedRequests: planned },
    summaries,
    goals: checkGoals(summaries),
    records,
    wallMs: performance.now() - t0,
  };
}
