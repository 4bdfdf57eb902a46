// What `npm run demo` prints about a run: the table with served / planned first, why a run served
// fewer, and the strategies on the same requests.

import type { BenchResult } from '../voice/bench.js';
import { LABELS, NO_GATEWAY } from '../voice/markdown.js';
import { viaGateway } from '../voice/oracle.js';
import type { StrategySummary } from '../voice/summary.js';
import { overBudgetCell, servedCell } from './html.js';
import { sameTurns } from './same-turns.js';

const ms = (v: number | null | undefined) => (v === null || v === undefined || !Number.isFinite(v) ? '–' : v.toFixed(0));

/**
 * The demo's table: how many of the planned requests each strategy served comes first, so a run
 * cut by the cap is seen before its percentiles are compared (they cover only what it served).
 */
export function demoTable(summaries: readonly StrategySummary[], planned: number, capS: number | undefined): string {
  const row = (cells: string[]) => `| ${cells.join(' | ')} |`;
  return [
    row(['strategy', 'served / planned', 'TTFT p50 ms', 'p90', 'p99', `turns > ${summaries[0]?.budgetMs ?? 300} ms`, 'cache hit rate', 'gateway overhead p50 / p99 ms']),
    row(['---', '---:', '---:', '---:', '---:', '---:', '---:', '---:']),
    ...summaries.map((s) => row([
      LABELS[s.strategy] ?? s.strategy, servedCell(s, planned, capS), ms(s.ttft.p50), ms(s.ttft.p90), ms(s.ttft.p99), overBudgetCell(s),
      s.hitRate === null ? '–' : `${(s.hitRate * 100).toFixed(1)}%`,
      viaGateway(s.strategy) ? `${s.overhead.p50Ms?.toFixed(3) ?? '–'} / ${s.overhead.p99Ms?.toFixed(3) ?? '–'}` : NO_GATEWAY,
    ])),
  ].join('\n');
}

/** Why a strategy served fewer than planned, in one line (empty when every one served them all). */
export function cutLine(summaries: readonly StrategySummary[], capS: number | undefined): string {
  const cut = summaries.filter((s) => s.truncated).map((s) => LABELS[s.strategy]?.replaceAll('**', '') ?? s.strategy);
  return cut.length === 0 ? '' : `  ${cut.join(', ')}: cut at the ${capS} s cap (no turn starts after it), so the turns that queued longest, the later ones with the longest history, are missing from ${cut.length > 1 ? 'their' : 'its'} figures`;
}

/** The strategies on the requests every one of them served: the like-for-like figures when a run was cut. */
export function sameTurnsLine(result: BenchResult): string {
  if (!result.summaries.some((s) => s.truncated)) return '';
  const same = sameTurns(result.records, result.summaries.map((s) => s.strategy));
  const each = same.byStrategy.map((b) => `${LABELS[b.strategy]?.replaceAll('**', '') ?? b.strategy} p50 ${ms(b.p50)} / p90 ${ms(b.p90)} ms`);
  return `  on the same ${same.common} requests (those every strategy served): ${each.join('; ')}`;
}
