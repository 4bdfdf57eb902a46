// The report's charts, from a voice bench result: TTFT CDF per strategy, p50 TTFT per turn,
// where the time to first token went (hops), and the gateway's own hops zoomed in.

import type { BenchResult } from '../voice/bench.js';
import { cdf } from '../voice/stats.js';
import { viaGateway } from '../voice/oracle.js';
import { HOP_NAMES } from '../voice/summary.js';
import { legend, lineChart, niceTicks, stackedBars } from './svg.js';

export const COLORS: Record<string, string> = {
  'round-robin': '#d1495b',
  'least-loaded': '#edae49',
  'session-hash': '#8e6cbf',
  affinity: '#00798c',
  oracle: '#30343f',
};
const HOP_COLORS: Record<string, string> = {
  parse: '#264653', route: '#2a9d8f', queue: '#8ab17d', connect: '#e9c46a', upstream_headers: '#f4a261', first_token: '#e76f51',
};
export const NAMES: Record<string, string> = { affinity: 'warmroute (affinity)', oracle: 'oracle (i mod R, no gateway)' };

const colorOf = (s: string) => COLORS[s] ?? '#555';
const nameOf = (s: string) => NAMES[s] ?? s;
const W = 1000;

export function ttftCdf(r: BenchResult): string {
  const by = r.summaries.map((s) => ({
    s: s.strategy,
    ttfts: r.records.filter((x) => x.strategy === s.strategy && x.ok && x.ttftMs !== null).map((x) => x.ttftMs as number),
  }));
  const all = by.flatMap((b) => b.ttfts);
  const lo = Math.max(1, 10 ** Math.floor(Math.log10(Math.max(1, Math.min(...all, 1e9)))));
  const hi = 10 ** Math.ceil(Math.log10(Math.max(...all, 10)));
  const ticks: number[] = [];
  for (let d = lo; d <= hi; d *= 10) for (const m of [1, 2, 5]) if (d * m >= lo && d * m <= hi) ticks.push(d * m);
  const chart = lineChart({
    title: 'TTFT distribution (CDF), every request',
    width: W, height: 360,
    x: { min: lo, max: hi, log: true, label: 'client TTFT, ms (log scale)', ticks, format: (v) => (v >= 1000 ? `${v / 1000}s` : `${v}`) },
    y: { min: 0, max: 1, label: 'share of requests ≤ x', ticks: [0, 0.25, 0.5, 0.75, 0.9, 1], format: (v) => `${Math.round(v * 100)}%` },
    // The oracle dashed: a reference to read the routers against, not one of them.
    series: by.map((b) => ({ name: nameOf(b.s), color: colorOf(b.s), points: cdf(b.ttfts).map((p) => ({ x: p.x, y: p.p })), step: true, width: b.s === 'affinity' ? 3 : 2, dash: !viaGateway(b.s) })),
    marks: [{ x: r.params.budgetMs, label: `${r.params.budgetMs} ms budget` }],
  });
  return chart + legend(by.map((b) => ({ name: nameOf(b.s), color: colorOf(b.s), dash: !viaGateway(b.s) })));
}

/** Log ticks 1-2-5 from the decade at or below lo to the one at or above hi. */
function logTicks(lo: number, hi: number): { min: number; max: number; ticks: number[] } {
  const min = 10 ** Math.floor(Math.log10(Math.max(1, lo)));
  const max = 10 ** Math.ceil(Math.log10(Math.max(hi, 10)));
  const ticks: number[] = [];
  for (let d = min; d <= max; d *= 10) for (const m of [1, 2, 5]) if (d * m <= max) ticks.push(d * m);
  return { min, max, ticks };
}

/** Where one strategy's figures are this many times another's, a linear axis flattens the rest: log. */
export const LOG_AXIS_RATIO = 10;

export function perTurn(r: BenchResult): string {
  const turns = r.params.workload.turns;
  const values = r.summaries.flatMap((s) => s.perTurn.flatMap((t) => [t.p50, t.p90])).filter((v) => Number.isFinite(v) && v > 0);
  const max = Math.max(...values, 10);
  const log = values.length > 0 && max / Math.min(...values) >= LOG_AXIS_RATIO;
  const ticks = niceTicks(max, 6);
  const y = log
    ? { ...logTicks(Math.min(...values), max), log: true, label: 'client TTFT, ms (log scale)', format: (v: number) => (v >= 1000 ? `${v / 1000}s` : `${v}`) }
    : { min: 0, max: ticks[ticks.length - 1], label: 'client TTFT, ms', ticks };
  const chart = lineChart({
    title: 'TTFT by turn: p50 (solid) and p90 (dashed) per strategy',
    width: W, height: 360,
    x: { min: 1, max: Math.max(2, turns), label: 'turn of the session', ticks: Array.from({ length: turns }, (_, i) => i + 1) },
    y,
    series: r.summaries.flatMap((s) => [
      { name: `${nameOf(s.strategy)} p50`, color: colorOf(s.strategy), points: s.perTurn.map((t) => ({ x: t.turn + 1, y: t.p50 })), width: s.strategy === 'affinity' ? 3 : 2 },
      { name: `${nameOf(s.strategy)} p90`, color: colorOf(s.strategy), points: s.perTurn.map((t) => ({ x: t.turn + 1, y: t.p90 })), dash: true, width: 1.5 },
    ]),
  });
  return chart + legend(r.summaries.map((s) => ({ name: nameOf(s.strategy), color: colorOf(s.strategy) })));
}

export function hopBreakdown(r: BenchResult): string {
  return stackedBars({
    title: 'Where the time to first token went (mean per request)',
    width: W,
    unit: 'ms',
    rows: r.summaries.map((s) => ({
      label: nameOf(s.strategy),
      segments: HOP_NAMES.map((h) => ({ name: h === 'first_token' ? 'replica queue + prefill → first token' : h, value: s.hopsMeanMs[h] ?? 0, color: HOP_COLORS[h] })),
    })),
  });
}

export function gatewayHops(r: BenchResult): string {
  return stackedBars({
    title: "The gateway's own hops, zoomed (mean per request, from Server-Timing)",
    width: W,
    unit: 'µs',
    digits: 0,
    // A strategy with no gateway has no hops: a row of zeros would read as a free gateway.
    rows: r.summaries.filter((s) => viaGateway(s.strategy)).map((s) => ({
      label: nameOf(s.strategy),
      segments: ['parse', 'route', 'queue', 'connect'].map((h) => ({ name: h, value: (s.hopsMeanMs[h] ?? 0) * 1000, color: HOP_COLORS[h] })),
    })),
  });
}
