// warmroute against a model of SGLang's cache_aware router (sglang-model.ts) on the calibrated
// simulator, over many orders of one workload. The real fleet gives a few runs, each a different
// order of the same prompts, and under pressure which groups a router keeps warm depends on that
// order as much as on the router: this says what each router gets in expectation, how often one is
// ahead of the other on the same order, and so what "ahead in every one of three runs" can mean.

import { desReplay } from './des-replay.js';
import { CPU_TINY_TIMING, replayEngine } from './engine-replay.js';
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
  /** Cached and prompt tokens per popularity class of the shared prompts (byPopularity), per router. */
  classes: Record<'warmroute' | 'sglang' | 'best', PopularityTokens | null>;
}

/** Prompt tokens and those served from cache, for the busiest quarter of the shared prompts, the next quarter, and the quieter half. */
export interface PopularityTokens { cached: [number, number, number]; prompt: [number, number, number] }

/**
 * The popularity class of each request's shared prompt (its first block, where each prompt's
 * salt starts): 0 for the busiest quarter of the prompts by requests in this order, 1 the next
 * quarter, 2 the rest. Under Zipf popularity this says whether the busiest prompts are the ones
 * kept warm.
 */
export function popularityClasses(t: Trace): number[] {
  const bs = t.engine.blockSize;
  const family = t.requests.map((r) => r.promptIds.slice(0, bs).join(','));
  const count = new Map<string, number>();
  for (const f of family) count.set(f, (count.get(f) ?? 0) + 1);
  const ranked = [...count.keys()].sort((a, b) => (count.get(b) as number) - (count.get(a) as number) || (a < b ? -1 : 1));
  const quarter = Math.max(1, Math.round(ranked.length / 4));
  const cls = new Map(ranked.map((f, i) => [f, i < quarter ? 0 : i < 2 * quarter ? 1 : 2]));
  return family.map((f) => cls.get(f) as number);
}

function tokensByClass(t: Trace, classes: readonly number[], cached: readonly (number | null)[]): PopularityTokens {
  const out: PopularityTokens = { cached: [0, 0, 0], prompt: [0, 0, 0] };
  t.requests.forEach((r, k) => {
    const c = cached[k];
    if (c === null || r.cachedTokens === null) return;
    out.cached[classes[k]] += c;
    out.prompt[classes[k]] += r.promptIds.length;
  });
  return out;
}

export interface VersusSummary {
  seeds: VersusSeed[];
  mean: { warmroute: number; sglang: number; roundRobin: number; bestShapeMedian: number | null; best: number | null };
  /** Hit rate per popularity class (busiest quarter, next quarter, quieter half), over every order. */
  byPopularity: Record<'warmroute' | 'sglang' | 'best', [number, number, number] | null>;
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
    const run = (strategy: 'affinity' | 'sglang-model' | 'round-robin') => desReplay(t, { strategy, timing: CPU_TINY_TIMING, kvModel: 'vllm', kvEvents: strategy === 'affinity' });
    const b = o.ideal ? bestPlacement(t, { timing: CPU_TINY_TIMING, kvModel: 'vllm' }) : null;
    const w = run('affinity');
    const s = run('sglang-model');
    const classes = popularityClasses(t);
    let best: PopularityTokens | null = null;
    if (b !== null) {
      const placed = { ...t, requests: t.requests.map((r) => ({ ...r, replica: b.placement[r.group] ?? r.replica })) };
      best = tokensByClass(t, classes, replayEngine(placed, { timing: CPU_TINY_TIMING, kvModel: 'vllm' }).map((p) => p.cachedTokens));
    }
    return {
      seed, warmroute: w.hitRate, sglang: s.hitRate, roundRobin: run('round-robin').hitRate, bestShapeMedian: b?.bestShape?.median ?? null, best: b?.hitRate ?? null,
      classes: { warmroute: tokensByClass(t, classes, w.cached), sglang: tokensByClass(t, classes, s.cached), best },
    };
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
    byPopularity: { warmroute: pooled(rows, 'warmroute'), sglang: pooled(rows, 'sglang'), best: o.ideal ? pooled(rows, 'best') : null },
    aheadOrEqual: rows.filter((r) => r.warmroute >= r.sglang).length,
    diffMean,
    diffSd,
  };
}

function pooled(rows: readonly VersusSeed[], who: 'warmroute' | 'sglang' | 'best'): [number, number, number] {
  const c = [0, 0, 0];
  const p = [0, 0, 0];
  for (const r of rows) {
    const x = r.classes[who];
    if (x === null) continue;
    for (let i = 0; i < 3; i++) {
      c[i] += x.cached[i];
      p[i] += x.prompt[i];
    }
  }
  return [0, 1, 2].map((i) => (p[i] === 0 ? 0 : c[i] / p[i])) as [number, number, number];
}
