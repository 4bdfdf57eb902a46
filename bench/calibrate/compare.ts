// Recorded against replayed: per trace, the hit rate the replicas served (their own counters and
// the sum of each response's cached tokens), the hit rate the simulated replica predicts for the
// same requests on the same replicas, and how far apart they are request by request.

import type { TimingKnobs } from '../sim/config.js';
import type { KvModel } from '../sim/kv-cache.js';
import { replayEngineWithEvents } from './engine-replay.js';
import { hitRate, type Trace } from './trace.js';

export interface ComparisonRow {
  workload: string;
  strategy: string;
  when: string;
  requests: number;
  /** vllm:prefix_cache_hits / queries over the run, all replicas. */
  countersHitRate: number;
  /** Σ cached / Σ prompt tokens of the responses (the same figure when every request was served). */
  servedHitRate: number;
  predictedHitRate: number;
  /** predicted − served, in points. */
  errorPoints: number;
  /** Requests whose predicted cached tokens equal the served ones. */
  exactShare: number;
  /** Mean |predicted − served| cached tokens per request. */
  meanAbsTokens: number;
  /** Blocks evicted over the run, all replicas: by vLLM's KV events (when captured) and by the simulated pool. */
  evicted: { real: number | null; sim: number };
  /** The same requests through the same router against the simulated fleet (closed-replay.ts), when run. */
  closedHitRate?: number;
  /** ideal.ts: the best group placement on vLLM's eviction, the pooled bound, unbounded caches. */
  ideal?: { best: number; bestShape: { shape: string; median: number } | null; pooled: number; unbounded: number };
}

export interface CompareOptions {
  timing: Readonly<TimingKnobs>;
  fidelity: KvModel;
}

export function compareTrace(trace: Trace, o: CompareOptions): ComparisonRow {
  const replay = replayEngineWithEvents(trace, { timing: o.timing, kvModel: o.fidelity });
  const predicted = replay.requests;
  const served = trace.requests.filter((r) => r.cachedTokens !== null);
  const both = trace.requests.map((r, i) => ({ r, p: predicted[i].cachedTokens })).filter((x) => x.r.cachedTokens !== null && x.p !== null);
  const q = trace.counters.reduce((s, c) => s + c.queries, 0);
  const h = trace.counters.reduce((s, c) => s + c.hits, 0);
  const servedHitRate = hitRate(served);
  const predictedHitRate = hitRate(both.map((x) => ({ promptIds: x.r.promptIds, cachedTokens: x.p })));
  return {
    workload: trace.workload, strategy: trace.strategy, when: trace.when, requests: served.length,
    countersHitRate: q === 0 ? 0 : h / q, servedHitRate, predictedHitRate,
    errorPoints: 100 * (predictedHitRate - servedHitRate),
    exactShare: both.length === 0 ? 0 : both.filter((x) => x.p === x.r.cachedTokens).length / both.length,
    meanAbsTokens: both.length === 0 ? 0 : both.reduce((s, x) => s + Math.abs((x.p as number) - (x.r.cachedTokens as number)), 0) / both.length,
    evicted: { real: trace.kvEvents ? trace.kvEvents.reduce((n, e) => n + e.removed, 0) : null, sim: replay.kvEvents.reduce((n, e) => n + e.removed, 0) },
  };
}

export function compareTraces(traces: readonly Trace[], o: CompareOptions): ComparisonRow[] {
  return traces.map((t) => compareTrace(t, o));
}

const pct = (x: number | undefined) => (x === undefined ? '—' : `${(100 * x).toFixed(1)}%`);
const pts = (x: number) => `${x >= 0 ? '+' : ''}${x.toFixed(1)}`;

/**
 * The calibration table: the real hit rate (the replicas' counters), the simulator's on the same
 * placement (engine replay) and with the router deciding (closed loop), each error in points, the
 * share of requests predicted exactly; then the ideal and what share of it the real run reached.
 */
export function comparisonMarkdown(rows: readonly ComparisonRow[]): string {
  const lines = [
    '| workload | router | requests | real | simulator, same placement | error | requests exact | blocks evicted, real / simulator | simulator, router deciding | error | ideal (best placement) | real, of ideal | best shape\'s median | pooled bound | unbounded |',
    '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...rows.map((r) => [
      r.workload, r.strategy, r.requests, pct(r.countersHitRate), pct(r.predictedHitRate), pts(r.errorPoints), pct(r.exactShare),
      `${r.evicted.real ?? '—'} / ${r.evicted.sim}`,
      pct(r.closedHitRate), r.closedHitRate === undefined ? '—' : pts(100 * (r.closedHitRate - r.servedHitRate)),
      pct(r.ideal?.best), r.ideal ? pct(r.countersHitRate / r.ideal.best) : '—',
      r.ideal?.bestShape ? `${pct(r.ideal.bestShape.median)} (${r.ideal.bestShape.shape})` : '—', pct(r.ideal?.pooled), pct(r.ideal?.unbounded),
    ].join(' | ')).map((l) => `| ${l} |`),
  ];
  return `${lines.join('\n')}\n`;
}
