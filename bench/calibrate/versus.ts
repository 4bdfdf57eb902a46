// warmroute against a model of SGLang's cache_aware router (sglang-model.ts) on the calibrated
// simulator, over many orders of one workload. The real fleet gives a few runs, each a different
// order of the same prompts, and under pressure which groups a router keeps warm depends on that
// order as much as on the router: this says what each router gets in expectation, how often one is
// ahead of the other on the same order, and so what "ahead in every one of three runs" can mean.

import { desReplay } from './des-replay.js';
import { CPU_TINY_TIMING } from './engine-replay.js';
import { bestPlacement } from './ideal.js';
import type { Trace } from './trace.js';
export type TraceOfSeed = (seed: number) => Trace;

export interface VersusSeed {
  seed: number;
  warmroute: number;
  sglang: number;
  roundRobin: number;
  /** The best shape's median placement (ideal.ts): a router that knows the shape, not the future. */
  bestShapeMedian: number | null;
  /** The best placement in hindsight. */
  best: number | null;
}

export interface VersusSummary {
  seeds: VersusSeed[];
  mean: { warmroute: number; sglang: number; roundRobin: number; bestShapeMedian: number | null; best: number | null };
  /** Seeds where warmroute's hit rate is at least the SGLang model's. */
  aheadOrEqual: number;
  /** Mean and standard deviation of warmroute − SGLang over the seeds, in points. */
  diffMean: number;
  diffSd: number;
}

/** `traceOf`: one order of the workload per seed (workloads.ts syntheticSharedTrace, syntheticMultiTurnTrace). */
export function versus(traceOf: TraceOfSeed, seeds: readonly number[], o: { ideal: boolean }): VersusSummary {
  const rows: VersusSeed[] = seeds.map((seed) => {
    const t = traceOf(seed);
    const run = (strategy: 'affinity' | 'sglang-model' | 'round-robin') => desReplay(t, { strategy, timing: CPU_TINY_TIMING, kvModel: 'vllm', kvEvents: strategy === 'affinity' }).hitRate;
    const b = o.ideal ? bestPlacement(t, { timing: CPU_TINY_TIMING, kvModel: 'vllm' }) : null;
    return { seed, warmroute: run('affinity'), sglang: run('sglang-model'), roundRobin: run('round-robin'), bestShapeMedian: b?.bestShape?.median ?? null, best: b?.hitRate ?? null };
  });
  const avg = (f: (r: VersusSeed) => number) => rows.reduce((s, r) => s + f(r), 0) / Math.max(1, rows.length);
  const diffs = rows.map((r) => 100 * (r.warmroute - r.sglang));
  const diffMean = diffs.reduce((s, d) => s + d, 0) / Math.max(1, diffs.length);
  const diffSd = Math.sqrt(diffs.reduce((s, d) => s + (d - diffMean) ** 2, 0) / Math.max(1, diffs.length - 1));
  return {
    seeds: rows,
    mean: {
      warmroute: avg((r) => r.warmroute), sglang: avg((r) => r.sglang), roundRobin: avg((r) => r.roundRobin),
      bestShapeMedian: o.ideal ? avg((r) => r.bestShapeMedian ?? 0) : null, best: o.ideal ? avg((r) => r.best ?? 0) : null,
    },
    aheadOrEqual: rows.filter((r) => r.warmroute >= r.sglang).length,
    diffMean,
    diffSd,
  };
}
