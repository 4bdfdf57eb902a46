// The routing issue's goals, checked on a run's summaries. Every goal is always listed: met,
// NOT met, or not measured (a strategy it needs was not run), never left out. Beside them,
// references: figures with no target of their own that say how to read the goals (the oracle).

import { ORACLE } from './oracle.js';
import type { StrategySummary } from './summary.js';

export interface Goal {
  name: string;
  target: string;
  measured: string;
  met: boolean | null;
}

export const AFFINITY = 'affinity';
export const ROUND_ROBIN = 'round-robin';

const pct = (v: number) => `${(v * 100).toFixed(1)}%`;
const x = (v: number) => `${v.toFixed(2)}×`;

function goal(name: string, target: string, value: number | null, show: (v: number) => string, ok: (v: number) => boolean, why = 'not measured'): Goal {
  if (value === null || !Number.isFinite(value)) return { name, target, measured: why, met: null };
  return { name, target, measured: show(value), met: ok(value) };
}

const ratio = (a: number | null | undefined, b: number | null | undefined) =>
  a === null || a === undefined || b === null || b === undefined || b === 0 ? null : a / b;

const missing = (...names: string[]) => `not measured (needs ${names.join(' and ')})`;

/** p90 of `a` over p90 of `b`, when both ran and have one. */
const p90Ratio = (a: StrategySummary | undefined, b: StrategySummary | undefined) => {
  const v = a && b ? ratio(a.ttft.p90, b.ttft.p90) : null;
  return v !== null && Number.isFinite(v) ? v : null;
};

/**
 * Round-robin's p90 over the oracle's, appended to the 5× goal: whether 5× was within reach of any
 * placement on this workload, so "the router falls short" reads apart from "nobody could".
 */
function bestAchievable(rr: StrategySummary | undefined, oracle: StrategySummary | undefined): string {
  const v = p90Ratio(rr, oracle);
  return `best achievable in this run (oracle placement): ${v === null ? missing(ROUND_ROBIN, ORACLE) : x(v)}`;
}

export function checkGoals(summaries: readonly StrategySummary[]): Goal[] {
  const wr = summaries.find((s) => s.strategy === AFFINITY);
  const rr = summaries.find((s) => s.strategy === ROUND_ROBIN);
  const oracle = summaries.find((s) => s.strategy === ORACLE);
  const ofIdeal = (s: { hitRate: number | null; idealHitRate: number | null }) => ratio(s.hitRate, s.idealHitRate);
  const p90 = goal('warmroute TTFT p90 ≥ 5× better than round-robin', 'round-robin p90 / warmroute p90 ≥ 5',
    wr && rr ? ratio(rr.ttft.p90, wr.ttft.p90) : null,
    (v) => `${rr!.ttft.p90.toFixed(0)} ms vs ${wr!.ttft.p90.toFixed(0)} ms = ${x(v)}`, (v) => v >= 5, missing(AFFINITY, ROUND_ROBIN));
  return [
    goal('warmroute cache hit rate ≥ 95% of ideal', 'hit rate / ideal ≥ 0.95',
      wr ? ofIdeal(wr) : null,
      (v) => `${pct(wr!.hitRate!)} of ${pct(wr!.idealHitRate!)} ideal = ${pct(v)}`, (v) => v >= 0.95, wr ? 'not measured' : missing(AFFINITY)),
    { ...p90, measured: `${p90.measured}; ${bestAchievable(rr, oracle)}` },
    goal('warmroute max/avg replica load ≤ 1.25', 'requests served: busiest replica / average ≤ 1.25',
      wr ? wr.load.maxOverAvg : null, (v) => x(v), (v) => v <= 1.25, wr ? 'not measured' : missing(AFFINITY)),
    goal('keyless sessions within 5% of keyed (hit rate)', "keyless hit rate ≥ 95% of keyed's, each as a share of its ideal",
      wr ? ratio(ofIdeal(wr.keyless), ofIdeal(wr.keyed)) : null,
      (v) => `keyless ${pct(wr!.keyless.hitRate!)} (${pct(ofIdeal(wr!.keyless)!)} of ideal) vs keyed ${pct(wr!.keyed.hitRate!)} (${pct(ofIdeal(wr!.keyed)!)}) = ${pct(v)}`,
      (v) => v >= 0.95, wr ? 'not measured (no keyless or no keyed sessions)' : missing(AFFINITY)),
    goal('keyless sessions within 5% of keyed (TTFT p50)', 'keyless p50 ≤ 1.05 × keyed p50',
      wr && wr.keyless.ttft.n && wr.keyed.ttft.n ? ratio(wr.keyless.ttft.p50, wr.keyed.ttft.p50) : null,
      (v) => `keyless ${wr!.keyless.ttft.p50.toFixed(0)} ms vs keyed ${wr!.keyed.ttft.p50.toFixed(0)} ms = ${x(v)}`,
      (v) => v <= 1.05, wr ? 'not measured (no keyless or no keyed sessions)' : missing(AFFINITY)),
  ];
}

export function goalLine(g: Goal): string {
  const verdict = g.met === null ? 'not measured' : g.met ? 'met' : 'NOT met';
  return `${verdict.padEnd(12)} ${g.name}: ${g.measured}`;
}

/** A figure printed with the goals that is not a goal itself: no target, no verdict. */
export interface Reference {
  name: string;
  measured: string;
}

/** warmroute against the best placement measured in the same run (1.00× = as good as the oracle). */
export function checkReferences(summaries: readonly StrategySummary[]): Reference[] {
  const wr = summaries.find((s) => s.strategy === AFFINITY);
  const oracle = summaries.find((s) => s.strategy === ORACLE);
  const v = p90Ratio(wr, oracle);
  return [{
    name: 'warmroute TTFT p90 vs the oracle placement',
    measured: v === null ? missing(AFFINITY, ORACLE) : `${wr!.ttft.p90.toFixed(0)} ms vs ${oracle!.ttft.p90.toFixed(0)} ms = ${x(v)} the oracle's p90`,
  }];
}

export function referenceLine(r: Reference): string {
  return `${'reference'.padEnd(12)} ${r.name}: ${r.measured}`;
}
