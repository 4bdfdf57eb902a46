// The demo's traced turn: one slow round-robin request (its p90) beside the same request (same
// session, turn and step) through warmroute, each read from its trace: the gateway's own hops, the
// replica's queue, prefill and decode (the simulator's llm_request span, as vLLM's). Where the time
// went, cold prefill or routing, in two rows and two waterfalls.

import type { JaegerTrace } from '../../src/probe/jaeger.js';
import { breakdown, type TraceBreakdown } from '../../src/probe/traces.js';
import type { TurnRecord } from '../voice/run.js';
import { esc } from './svg.js';
import { traceSpanUs, waterfallSvg } from '../tracing/waterfall.js';

export interface TracedSide { strategy: string; record: TurnRecord; trace: TraceBreakdown; raw: JaegerTrace }
export interface TracedTurn { session: number; turn: number; step: number; sides: TracedSide[] }

const key = (r: TurnRecord) => `${r.session}/${r.turn}/${r.step}/${r.call ?? ''}`;
const complete = (t: JaegerTrace | null) => {
  const b = t && breakdown(t);
  return !!b && b.gateway !== null && b.replica !== null;
};

/**
 * The round-robin request at its TTFT p90 among those warmroute served too, and both traces;
 * null when either strategy is missing or no pair has both traces whole (`trace` reads one).
 */
export function pickTracedTurn(records: readonly TurnRecord[], slow: string, fast: string, trace: (id: string) => JaegerTrace | null): TracedTurn | null {
  const fastBy = new Map(records.filter((r) => r.strategy === fast && r.ok && r.traceId).map((r) => [key(r), r]));
  const pairs = records
    .filter((r) => r.strategy === slow && r.ok && r.traceId && fastBy.has(key(r)))
    .map((r) => ({ slow: r, fast: fastBy.get(key(r))! }))
    .filter((p) => complete(trace(p.slow.traceId!)) && complete(trace(p.fast.traceId!)))
    .sort((a, b) => a.slow.ttftMs! - b.slow.ttftMs!);
  if (pairs.length === 0) return null;
  const p = pairs[Math.floor(0.9 * (pairs.length - 1))];
  const side = (strategy: string, r: TurnRecord): TracedSide => {
    const raw = trace(r.traceId!)!;
    return { strategy, record: r, trace: breakdown(raw), raw };
  };
  return { session: p.slow.session, turn: p.slow.turn, step: p.slow.step, sides: [side(slow, p.slow), side(fast, p.fast)] };
}

const ms = (v: number | null | undefined, d = 1) => (v === null || v === undefined || !Number.isFinite(v) ? '–' : v.toFixed(d));
const tokens = (v: number | null | undefined) => (v === null || v === undefined ? '–' : v.toLocaleString('en-US'));
const NAME: Record<string, string> = { affinity: 'warmroute' };
const nameOf = (s: string) => NAME[s] ?? s;

const HEAD = ['', 'client TTFT', 'gateway own', 'between', 'vLLM queue', 'prefill', 'cached / prompt', 'replica · route'];
function cells(s: TracedSide): string[] {
  const g = s.trace.gateway!;
  const v = s.trace.replica!;
  return [nameOf(s.strategy), ms(s.record.ttftMs), ms(g.ownMs, 2), ms(s.trace.betweenMs), ms(v.queueMs), ms(v.prefillMs),
    `${tokens(g.cachedTokens)} / ${tokens(s.record.promptTokens)}`, `${g.replica ?? '?'} · ${g.route ?? '?'}`];
}

/** The one line that says where the slow side's time went, against the fast side's. */
function verdict(t: TracedTurn): string {
  const [slow, fast] = t.sides;
  const sv = slow.trace.replica!;
  const fv = fast.trace.replica!;
  return `${nameOf(slow.strategy)}: ${ms(sv.prefillMs, 0)} ms of prefill with ${tokens(slow.trace.gateway!.cachedTokens)} of ${tokens(slow.record.promptTokens)} prompt tokens cached, ${ms(sv.queueMs, 0)} ms queued in the engine; `
    + `${nameOf(fast.strategy)}: ${ms(fv.prefillMs, 0)} ms of prefill, ${ms(fv.queueMs, 0)} ms queued, and its routing (parse + route + queue + connect) ${ms(fast.trace.gateway!.ownMs, 2)} ms`;
}

/** The demo's printed lines. */
export function tracedTurnLines(t: TracedTurn | null): string[] {
  if (t === null) return ['  traced turn: no round-robin request with warmroute\'s same request and both traces whole (see bench/out/demo.json)'];
  const rows = [HEAD, ...t.sides.map(cells)];
  const widths = HEAD.map((_, c) => Math.max(...rows.map((r) => r[c].length)));
  const line = (r: string[]) => `    ${r.map((cell, c) => (c === 0 || c === r.length - 1 ? cell.padEnd(widths[c]) : cell.padStart(widths[c]))).join('  ').trimEnd()}`;
  return [
    `  one slow turn, traced (session ${t.session}, turn ${t.turn + 1}: round-robin's p90, and the same request through warmroute), ms:`,
    ...rows.map(line),
    `    ${verdict(t)}`,
    '    (between: the replica\'s API server before its engine, which neither the gateway\'s hops nor the engine count; the waterfalls are in the report)',
  ];
}

/** The report's section: the same table, the verdict, and each request's waterfall. */
export function tracedTurnHtml(t: TracedTurn | null): string {
  if (t === null) return '<h2>One slow turn, traced</h2><p class="note">No round-robin request with warmroute\'s same request and both traces whole.</p>';
  const th = HEAD.map((h) => `<th>${esc(h)}</th>`).join('');
  const tr = t.sides.map((s) => `<tr${s.strategy === 'affinity' ? ' class="wr"' : ''}>${cells(s).map((c) => `<td>${esc(c)}</td>`).join('')}</tr>`).join('');
  // One time scale for both, so the bars compare.
  const axisUs = Math.max(...t.sides.map((s) => traceSpanUs(s.raw)));
  const falls = t.sides.map((s) => `<div class="chart"><p class="note"><b>${esc(nameOf(s.strategy))}</b> · trace ${esc(s.raw.traceID)}</p>${waterfallSvg(s.raw, 1000, axisUs).svg}</div>`).join('');
  return `<h2>One slow turn, traced</h2>
<p class="sub">Session ${t.session}, turn ${t.turn + 1}: the round-robin request at its TTFT p90, and the same request through warmroute. Each request started a trace (its <code>traceparent</code>); the gateway's SERVER span holds its hops, the simulated replica's <code>llm_request</code> span (vLLM's, with its attributes) its queue, prefill and decode.</p>
<table><tr>${th}</tr>${tr}</table>
<p class="note">${esc(verdict(t))}. Between: the replica's API server before its engine (the simulator's frontend), counted by neither the gateway's hops nor the engine.</p>
${falls}`;
}
