// The voice bench as one self-contained HTML page: inline CSS and SVG, no script, no external asset.

import type { BenchResult } from '../voice/bench.js';
import { checkReferences, verdictOf, type Goal, type Reference } from '../voice/goals.js';
import { MULTI_GATEWAY_NOTE, NO_GATEWAY, ORACLE_NOTE, paramsLine } from '../voice/markdown.js';
import { gatewaysOf, viaGateway } from '../voice/oracle.js';
import type { StrategySummary } from '../voice/summary.js';
import { COLORS, gatewayHops, hopBreakdown, NAMES, perTurn, ttftCdf } from './charts.js';
import { sameTurns } from './same-turns.js';
import { esc } from './svg.js';
import { turnWaitChart } from './turn-chart.js';

export const CSS = `
body{font:15px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;color:#1d2327;max-width:1060px;margin:24px auto;padding:0 16px;background:#fbfbfa}
h1{font-size:24px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
.sub{color:#555;margin:0 0 12px}
table{border-collapse:collapse;width:100%;font-size:13.5px;background:#fff}
th,td{border:1px solid #e1e1e1;padding:5px 7px;text-align:right;white-space:nowrap}th{background:#f2f4f5}
td:first-child,th:first-child{text-align:left}
tr.wr td{background:#eef7f8;font-weight:600}
th{white-space:normal;vertical-align:bottom}
table.keys td:last-child{white-space:normal;text-align:left}
.swatch{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:6px}
ul.goals{list-style:none;padding:0;margin:0}ul.goals li{margin:6px 0;padding:8px 10px;border-radius:6px;background:#fff;border:1px solid #e1e1e1}
.badge{display:inline-block;min-width:92px;text-align:center;font-weight:700;border-radius:4px;padding:1px 8px;margin-right:10px;color:#fff}
.badge.met{background:#2a9d5c}.badge.not{background:#c8372d}.badge.na{background:#888}.badge.ref{background:#30343f}
tr.direct td{font-style:italic;color:#1d2327;background:#f6f6f3}
.chart{background:#fff;border:1px solid #e1e1e1;border-radius:6px;padding:8px;margin:10px 0}
svg{max-width:100%;height:auto;font-family:inherit}
.title{font-size:15px;font-weight:600;fill:#1d2327}.tick{font-size:11.5px;fill:#555}.axis{font-size:12.5px;fill:#333}.label{font-size:12.5px;fill:#1d2327}
.grid{stroke:#eceff1;stroke-width:1}.mark{stroke:#c8372d;stroke-dasharray:3 3}.marklabel{font-size:11.5px;fill:#c8372d}
.legend{display:flex;gap:18px;flex-wrap:wrap;font-size:13px;margin:2px 0 0 56px}.legend svg{vertical-align:middle;margin-right:5px}
dl{display:grid;grid-template-columns:max-content 1fr;gap:3px 14px;font-size:13.5px}dt{color:#555}dd{margin:0}
.note{font-size:13px;color:#444}`;

const f = (v: number | null | undefined, d = 0) => (v === null || v === undefined || !Number.isFinite(v) ? '–' : v.toFixed(d));
const pct = (v: number | null | undefined) => (v === null || v === undefined ? '–' : `${(v * 100).toFixed(1)}%`);

function table(ss: readonly StrategySummary[], head: string[], cells: (s: StrategySummary) => string[], cls = ''): string {
  const rows = ss.map((s) => {
    const name = `<span class="swatch" style="background:${COLORS[s.strategy] ?? '#555'}"></span>${esc(NAMES[s.strategy] ?? s.strategy)}`;
    const cls = s.strategy === 'affinity' ? ' class="wr"' : viaGateway(s.strategy) ? '' : ' class="direct"';
    return `<tr${cls}>${[name, ...cells(s)].map((c) => `<td>${c}</td>`).join('')}</tr>`;
  });
  return `<table${cls ? ` class="${cls}"` : ''}><thead><tr>${['strategy', ...head].map((h) => `<th>${esc(h)}</th>`).join('')}</tr></thead><tbody>${rows.join('')}</tbody></table>`;
}

/**
 * Requests served of those planned, and why not all: a strategy cut by the duration cap served
 * fewer, and its percentiles are over what it served (its later, longer turns are missing).
 */
export function servedCell(s: StrategySummary, planned: number, capS: number | undefined): string {
  return `${s.requests} / ${planned}${s.truncated ? ` (cut at ${capS ?? '?'} s)` : ''}`;
}

/** Over-budget turns as a share of the requests served, with the counts: 88% (95 of 108). */
export function overBudgetCell(s: StrategySummary): string {
  return s.ttft.n ? `${((s.overBudget / s.ttft.n) * 100).toFixed(0)}% (${s.overBudget} of ${s.ttft.n})` : '–';
}

function summaryTables(ss: readonly StrategySummary[], planned: number, capS: number | undefined): string {
  const main = table(ss, ['served / planned', 'TTFT p50 ms', 'p90', 'p99', `turns > ${ss[0]?.budgetMs ?? 300} ms`, 'hit rate (vLLM)', 'ideal', 'of ideal', 'max/avg load', 'gateway overhead p50 / p99 ms', 'errors'], (s) => [
    servedCell(s, planned, capS), f(s.ttft.p50), f(s.ttft.p90), f(s.ttft.p99), overBudgetCell(s), pct(s.hitRate), pct(s.idealHitRate),
    s.hitRate !== null && s.idealHitRate ? pct(s.hitRate / s.idealHitRate) : '–', f(s.load.maxOverAvg, 2),
    viaGateway(s.strategy) ? `${f(s.overhead.p50Ms, 3)} / ${f(s.overhead.p99Ms, 3)}` : NO_GATEWAY, String(s.errors),
  ]);
  const keys = table(ss, ['keyed TTFT p50 / p90', 'keyless TTFT p50 / p90', 'keyed hit rate', 'keyless hit rate', 'requests per replica', 'peak in flight', 'route reasons'], (s) => [
    `${f(s.keyed.ttft.p50)} / ${f(s.keyed.ttft.p90)}`, `${f(s.keyless.ttft.p50)} / ${f(s.keyless.ttft.p90)}`,
    pct(s.keyed.hitRate), pct(s.keyless.hitRate), esc(Object.values(s.load.served).join(' / ') || '–'),
    esc(Object.values(s.load.peakInflight).join(' / ') || '–'),
    viaGateway(s.strategy) ? esc(Object.entries(s.routes).map(([k, v]) => `${k} ${v}`).join(', ')) : NO_GATEWAY,
  ], 'keys');
  return `${main}<div style="height:10px"></div>${keys}`;
}

/** Per caller turn next to per request, as the field report's table does (turn-stats.ts). */
function turnsTable(ss: readonly StrategySummary[]): string {
  const b = ss[0]?.budgetMs ?? 300;
  const withTurns = ss.filter((s) => s.turns);
  if (withTurns.length === 0) return '';
  const dist = table(withTurns, ['per request: mean ms', 'median', 'p90', 'p99', `> ${b} ms`, 'per turn: mean ms', 'median', 'p90', 'p99', `> ${b} ms`], (s) => {
    const t = s.turns!;
    const d = (x: typeof t.perTurn) => [f(x.mean), f(x.p50), f(x.p90), f(x.p99), `${x.overBudget} / ${x.n}`];
    return [...d(t.perRequest), ...d(t.perTurn)];
  });
  const shape = table(withTurns, ['calls per turn p50 / p90', 'canned turns', 'turns with calls at once', "gateway's turn wait p50 ms", "client's p50, same turns", 'per-turn |Δ| p50 ms', 'calls agree'], (s) => {
    const t = s.turns!;
    const g = t.gateway;
    return [`${f(t.callsP50)} / ${f(t.callsP90)}`, `${t.canned} / ${t.turns}`, String(t.overlappedTurns),
      ...(g ? [f(g.gatewayP50, 1), f(g.clientP50, 1), f(g.medianAbsDiffMs, 2), `${g.callsAgree} / ${g.matched}`] : [NO_GATEWAY, NO_GATEWAY, NO_GATEWAY, NO_GATEWAY])];
  });
  return `${dist}<div style="height:10px"></div>${shape}`;
}

/** Where a run was cut: why, and the strategies on the requests every one of them served. */
function sameTurnsHtml(r: BenchResult): string {
  const same = sameTurns(r.records, r.summaries.map((s) => s.strategy));
  const rows = same.byStrategy.map((b) => `<tr><td>${esc(NAMES[b.strategy] ?? b.strategy)}</td><td>${f(b.p50)}</td><td>${f(b.p90)}</td><td>${f(b.p99)}</td></tr>`);
  return `<p class="note"><b>Not every strategy served every planned request:</b> a run stops starting turns at its ${r.params.maxDurationS} s cap, so a strategy whose turns queue serves fewer, and its percentiles above leave out its later (longer-history) turns. On the same ${same.common} requests, those every strategy served:</p>
<table><thead><tr><th>strategy</th><th>TTFT p50 ms</th><th>p90</th><th>p99</th></tr></thead><tbody>${rows.join('')}</tbody></table>`;
}

function goalsList(goals: readonly Goal[], refs: readonly Reference[]): string {
  const items = goals.map((g) => {
    const word = verdictOf(g);
    const cls = g.met === null ? 'na' : g.met ? 'met' : 'not';
    return `<li><span class="badge ${cls}">${word}</span><b>${esc(g.name)}</b> — ${esc(g.measured)} <span class="note">(target: ${esc(g.target)})</span></li>`;
  });
  const more = refs.map((x) => `<li><span class="badge ref">reference</span><b>${esc(x.name)}</b> — ${esc(x.measured)}</li>`);
  return `<ul class="goals">${[...items, ...more].join('')}</ul>`;
}

function paramsList(r: BenchResult): string {
  const w = r.params.workload;
  const items: [string, string][] = [
    ['when', r.when], ['machine', `${r.machine.cpus} × ${r.machine.cpu}, Node ${r.machine.node}`],
    ['fleet', `${r.params.replicas} simulated vLLM replicas (bench/sim, calibrated to the field report's H100 figures), ${r.params.kvBlocks ?? 24576} KV blocks of 16 tokens each; caches reset between strategies`],
    ['warmup', r.params.warmup ? "every agent's tools + system prompt sent once to every replica before the sessions (the report's deploy warmup); not counted" : 'none: the first turns meet cold replicas'],
    ['sessions', `${w.sessions} concurrent, ${w.turns} turns each, starting over ${w.startSpreadMs} ms`],
    ['agents', `${w.groups}, system prompts ${w.systemTokens[0]}–${w.systemTokens[1]} tokens`],
    ['turns', `utterance ${w.userTokens[0]}–${w.userTokens[1]} tokens, answer ${r.params.outputTokens[0]}–${r.params.outputTokens[1]} tokens sent back verbatim, ${Math.round(w.toolTurnShare * 100)}% tool turns, think ${w.thinkMs[0]}–${w.thinkMs[1]} ms`],
    ['keys', `${Math.round(w.keylessShare * 100)}% keyless; of the keyed, ${Math.round(w.bodyKeyShare * 100)}% via body prompt_cache_key, the rest x-session-id`],
    ['requests', `${r.params.plannedRequests} planned per strategy; budget ${r.params.budgetMs} ms; cap ${r.params.maxDurationS} s per strategy; seed ${w.seed}`],
    ['wall time', `${(r.wallMs / 1000).toFixed(1)} s`],
  ];
  return `<dl>${items.map(([k, v]) => `<dt>${esc(k)}</dt><dd>${esc(v)}</dd>`).join('')}</dl>`;
}

export function buildHtml(r: BenchResult, title = 'warmroute — voice sessions benchmark'): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${esc(title)}</title><style>${CSS}</style></head><body>
<h1>${esc(title)}</h1>
<p class="sub">${esc(paramsLine(r))}</p>
<h2>Summary</h2>
${summaryTables(r.summaries, r.params.plannedRequests, r.params.maxDurationS)}
${r.summaries.some((s) => s.truncated) ? sameTurnsHtml(r) : ''}
<p class="note">TTFT: request sent → first content chunk at the client, streaming, every request. Hit rate: Σ vllm:prefix_cache_hits_total / Σ vllm:prefix_cache_queries_total over the replicas during the strategy's run.
Ideal: every session on a replica of its own with unbounded KV, its agent's system prompt warm once any earlier request computed it — the run's exact token streams replayed through a model of the simulator's prefix cache.
Load: requests served by the busiest replica over the fleet average. Gateway overhead: warmroute's own <code>warmroute_gateway_overhead_seconds</code> histogram.${r.summaries.some((s) => !viaGateway(s.strategy)) ? `\n${esc(ORACLE_NOTE)}` : ''}${r.summaries.some((s) => gatewaysOf(s.strategy) > 1) ? `\n${esc(MULTI_GATEWAY_NOTE)}` : ''}</p>
<h2>Goals</h2>
${goalsList(r.goals, checkReferences(r.summaries))}
${r.turns?.some((t) => t.calls > 1) ? `<h2 id="turns">Per turn, not just per request</h2>
<p class="note">A caller's turn is every LLM call that follows one utterance (an orchestrated agent's classification and extraction calls, a tool loop, the answer); its wait runs from the turn's first request to the first content of its last call. Canned turns call no model. The gateway counts the same turns itself (<code>warmroute_turn_calls</code>, <code>warmroute_turn_wait_seconds</code>, the admin session view).</p>
${turnsTable(r.summaries)}
<div class="chart">${turnWaitChart(r)}</div>` : ''}
<h2>TTFT distribution</h2>
<div class="chart">${ttftCdf(r)}</div>
<h2>TTFT by turn</h2>
<p class="note">A voice session's prompt is its agent's system prompt plus a history that grows every turn. A router that keeps the session where its prefix is cached prefills only the new turn; one that moves it re-prefills what the new replica has not seen.</p>
<div class="chart">${perTurn(r)}</div>
<h2 id="per-hop">Per-hop breakdown</h2>
<div class="chart">${hopBreakdown(r)}</div>
<div class="chart">${gatewayHops(r)}</div>
<h2>Run parameters</h2>
${paramsList(r)}
</body></html>
`;
}
