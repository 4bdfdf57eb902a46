// The caller's wait per turn next to the per-request TTFT: what a per-request dashboard shows and
// what the caller hears, side by side, per strategy (one CDF each).

import type { BenchResult } from '../voice/bench.js';
import { cdf } from '../voice/stats.js';
import { COLORS, NAMES } from './charts.js';
import { legend, lineChart } from './svg.js';

const W = 1000;

export function turnWaitChart(r: BenchResult): string {
  const turns = r.turns ?? [];
  if (turns.length === 0) return '';
  const by = r.summaries.map((s) => ({
    s: s.strategy,
    requests: r.records.filter((x) => x.strategy === s.strategy && x.ok && x.ttftMs !== null).map((x) => x.ttftMs as number),
    // A canned turn waits for no model: a fraction of a millisecond, drawn at the axis' floor.
    turns: turns.filter((t) => t.strategy === s.strategy && t.ok && t.waitMs !== null).map((t) => Math.max(1, t.waitMs as number)),
  }));
  const all = by.flatMap((b) => [...b.requests, ...b.turns]);
  const hi = 10 ** Math.ceil(Math.log10(Math.max(...all, 10)));
  const ticks: number[] = [];
  for (let d = 1; d <= hi; d *= 10) for (const m of [1, 2, 5]) if (d * m <= hi) ticks.push(d * m);
  const color = (s: string) => COLORS[s] ?? '#555';
  const name = (s: string) => NAMES[s] ?? s;
  const chart = lineChart({
    title: 'Per-turn wait (solid) next to per-request TTFT (dashed), CDF per strategy',
    width: W, height: 380,
    x: { min: 1, max: hi, log: true, label: 'ms at the client (log scale): turn = first request sent → first content of its last call; canned turns at 1 ms', ticks, format: (v) => (v >= 1000 ? `${v / 1000}s` : `${v}`) },
    y: { min: 0, max: 1, label: 'share ≤ x', ticks: [0, 0.25, 0.5, 0.75, 0.9, 1], format: (v) => `${Math.round(v * 100)}%` },
    series: by.flatMap((b) => [
      { name: `${name(b.s)} per turn`, color: color(b.s), points: cdf(b.turns).map((p) => ({ x: p.x, y: p.p })), step: true, width: b.s === 'affinity' ? 3 : 2 },
      { name: `${name(b.s)} per request`, color: color(b.s), points: cdf(b.requests).map((p) => ({ x: p.x, y: p.p })), step: true, width: 1.5, dash: true },
    ]),
    marks: [{ x: r.params.budgetMs, label: `${r.params.budgetMs} ms budget` }],
  });
  return chart + legend([
    ...by.map((b) => ({ name: name(b.s), color: color(b.s) })),
    { name: 'per turn', color: '#555' }, { name: 'per request', color: '#555', dash: true },
  ]);
}
