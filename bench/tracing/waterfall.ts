// One trace (Jaeger's query API JSON) drawn as a waterfall in inline SVG: a row per span, indented
// under its parent, coloured by service; under warmroute's SERVER span its hops (the span's events,
// each with its duration), under vLLM's llm_request its queue, prefill and decode (its attributes);
// a line where each of them saw the first token. Used by render-trace.ts (docs/trace.png) and by
// the demo's report.

import type { JaegerSpan, JaegerTrace } from '../../src/probe/jaeger.js';
import { A } from '../../src/telemetry/tracing/attributes.js';
import { esc } from '../report/svg.js';

/** warmroute and vLLM keep their colours in every picture; a caller's service gets the next free one. */
const SERVICE_COLORS: Record<string, string> = { warmroute: '#2f80ed', vllm: '#27ae60' };
const OTHER_COLORS = ['#7b5cd6', '#e67e22', '#8e8e8e'];
const HOP_COLORS: Record<string, string> = {
  parse: '#9ec5fe', route: '#5b9cf6', queue: '#f4b400', connect: '#1a73e8',
  upstream_headers: '#a0a8b8', upstream_first_token: '#6c7a96', stream: '#c9d3e6',
};
const PHASE_COLORS = { queue: '#f4b400', prefill: '#e8710a', decode: '#81c995' } as const;

const ROW = 30;
const LABEL_W = 330;
const RIGHT = 24;
/** Tags every span has (the SDK's own), left out of the attribute lists. */
const HIDDEN = new Set(['otel.scope.name', 'otel.scope.version', 'span.kind', 'internal.span.format', 'otel.status_code']);

const tag = (s: JaegerSpan, key: string): unknown => s.tags.find((t) => t.key === key)?.value;
const num = (v: unknown) => (typeof v === 'number' ? v : typeof v === 'string' && v !== '' ? Number(v) : NaN);
const fmtMs = (ms: number) => (ms >= 100 ? ms.toFixed(0) : ms >= 10 ? ms.toFixed(1) : ms.toFixed(2));

interface Row { span: JaegerSpan; depth: number }

/** Depth-first from the roots (spans whose parent is not in the trace), children by start time. */
function rows(t: JaegerTrace): Row[] {
  const ids = new Set(t.spans.map((s) => s.spanID));
  const parent = (s: JaegerSpan) => s.references.find((r) => r.refType === 'CHILD_OF' && ids.has(r.spanID))?.spanID;
  const byStart = (a: JaegerSpan, b: JaegerSpan) => a.startTime - b.startTime;
  const out: Row[] = [];
  const walk = (s: JaegerSpan, depth: number) => {
    out.push({ span: s, depth });
    for (const c of t.spans.filter((x) => parent(x) === s.spanID).sort(byStart)) walk(c, depth + 1);
  };
  for (const root of t.spans.filter((s) => parent(s) === undefined).sort(byStart)) walk(root, 0);
  return out;
}

interface Segment { name: string; startUs: number; durUs: number; color: string }

/** The hops of warmroute's SERVER span: each event marks its hop's start and carries its duration. */
function hopSegments(s: JaegerSpan): Segment[] {
  return s.logs.flatMap((l) => {
    const name = String(l.fields.find((f) => f.key === 'event')?.value ?? '');
    const d = num(l.fields.find((f) => f.key === A.hopMs)?.value);
    return Number.isFinite(d) ? [{ name, startUs: l.timestamp, durUs: d * 1000, color: HOP_COLORS[name] ?? '#bbb' }] : [];
  });
}

/** vLLM's phases, from its attributes (seconds): queue then prefill up to the first token, decode after it. */
function enginePhases(s: JaegerSpan): Segment[] {
  const sec = (k: string) => num(tag(s, `gen_ai.latency.${k}`)) * 1e6;
  const [ttft, queue, prefill, decode] = [sec('time_to_first_token'), sec('time_in_queue'), sec('time_in_model_prefill'), sec('time_in_model_decode')];
  if (![ttft, queue, prefill, decode].every(Number.isFinite)) return [];
  const first = s.startTime + ttft;
  return [
    { name: 'queue', startUs: first - prefill - queue, durUs: queue, color: PHASE_COLORS.queue },
    { name: 'prefill', startUs: first - prefill, durUs: prefill, color: PHASE_COLORS.prefill },
    { name: 'decode', startUs: first, durUs: decode, color: PHASE_COLORS.decode },
  ];
}

function niceStep(totalMs: number): number {
  const raw = totalMs / 8;
  const p = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw) ?? raw;
}

export interface Waterfall { svg: string; width: number; height: number }

/** How long a trace lasts, first span's start to last span's end, in µs. */
export const traceSpanUs = (t: JaegerTrace) => Math.max(...t.spans.map((s) => s.startTime + s.duration)) - Math.min(...t.spans.map((s) => s.startTime));

/** The waterfall of `t`, `width` pixels wide; `axisUs`: the time axis's length (to draw traces side by side on one scale), else the trace's. */
export function waterfallSvg(t: JaegerTrace, width: number, axisUs = traceSpanUs(t)): Waterfall {
  const list = rows(t);
  const t0 = Math.min(...t.spans.map((s) => s.startTime));
  const t1 = t0 + Math.max(axisUs, traceSpanUs(t));
  const plotW = width - LABEL_W - RIGHT;
  const x = (us: number) => LABEL_W + ((us - t0) / Math.max(1, t1 - t0)) * plotW;
  const others = [...new Set(list.map((r) => t.processes[r.span.processID]?.serviceName ?? '?'))].filter((n) => !(n in SERVICE_COLORS));
  const color = (s: JaegerSpan) => {
    const name = t.processes[s.processID]?.serviceName ?? '?';
    return SERVICE_COLORS[name] ?? OTHER_COLORS[others.indexOf(name) % OTHER_COLORS.length];
  };
  const parts: string[] = [];
  const marks: { us: number; label: string; color: string }[] = [];
  let y = 40;

  const bar = (seg: Segment, yy: number, h: number, label: boolean) => {
    const xa = x(seg.startUs);
    const w = Math.max(1, x(seg.startUs + seg.durUs) - xa);
    parts.push(`<rect x="${xa.toFixed(1)}" y="${yy}" width="${w.toFixed(1)}" height="${h}" fill="${seg.color}"><title>${esc(`${seg.name} ${fmtMs(seg.durUs / 1000)} ms`)}</title></rect>`);
    if (label && w > 70) parts.push(`<text x="${(xa + w / 2).toFixed(1)}" y="${yy + h - 4}" text-anchor="middle" class="wf-seg">${esc(`${seg.name} ${fmtMs(seg.durUs / 1000)}`)}</text>`);
  };
  const subRow = (title: string, depth: number, segs: Segment[]) => {
    parts.push(`<text x="${12 + depth * 18}" y="${y + 15}" class="wf-sub">${esc(title)}</text>`);
    for (const seg of segs) bar(seg, y + 3, 16, true);
    // The short segments, named below the row so none hides another.
    const small = segs.filter((seg) => x(seg.startUs + seg.durUs) - x(seg.startUs) <= 70);
    if (small.length > 0) {
      parts.push(`<text x="${x(small[0].startUs).toFixed(1)}" y="${y + 33}" class="wf-small">${esc(small.map((seg) => `${seg.name} ${fmtMs(seg.durUs / 1000)}`).join(' · '))} ms</text>`);
      y += 14;
    }
    y += ROW;
  };

  for (const { span: s, depth } of list) {
    const service = t.processes[s.processID]?.serviceName ?? '?';
    parts.push(`<text x="${12 + depth * 18}" y="${y + 15}" class="wf-name">${esc(s.operationName)}</text>`);
    parts.push(`<text x="${LABEL_W - 10}" y="${y + 15}" text-anchor="end" class="wf-svc" style="fill:${color(s)}">${esc(service)}</text>`);
    bar({ name: s.operationName, startUs: s.startTime, durUs: s.duration, color: color(s) }, y + 2, 18, false);
    const xe = x(s.startTime + s.duration);
    // The duration after the bar, or inside its end when the bar reaches the right edge.
    const inside = xe + 70 > width;
    parts.push(`<text x="${(inside ? xe - 6 : xe + 4).toFixed(1)}" y="${y + 16}" ${inside ? 'text-anchor="end"' : ''} class="wf-dur${inside ? ' wf-in' : ''}">${fmtMs(s.duration / 1000)} ms</text>`);
    y += ROW;
    const hops = hopSegments(s);
    if (hops.length > 0) {
      subRow('hops (span events)', depth + 1, hops);
      const ttfc = num(tag(s, A.timeToFirstChunk));
      if (Number.isFinite(ttfc)) marks.push({ us: s.startTime + ttfc * 1e6, label: `warmroute: first token ${fmtMs(ttfc * 1000)} ms`, color: color(s) });
    }
    if (s.operationName === 'llm_request') {
      const phases = enginePhases(s);
      if (phases.length > 0) {
        subRow('engine (attributes)', depth + 1, phases);
        const ttft = num(tag(s, 'gen_ai.latency.time_to_first_token'));
        marks.push({ us: s.startTime + ttft * 1e6, label: `vLLM: first token ${fmtMs(ttft * 1000)} ms`, color: color(s) });
      }
    }
  }
  const bottom = y;
  // The time axis on top, and the first-token lines through every row.
  const step = niceStep((t1 - t0) / 1000);
  for (let ms = 0; ms * 1000 <= t1 - t0; ms += step) {
    const xx = x(t0 + ms * 1000);
    parts.push(`<line x1="${xx.toFixed(1)}" y1="26" x2="${xx.toFixed(1)}" y2="${bottom}" class="wf-grid"/><text x="${xx.toFixed(1)}" y="20" text-anchor="middle" class="wf-tick">${fmtMs(ms)} ms</text>`);
  }
  marks.forEach((m, i) => {
    const xx = x(m.us);
    parts.push(`<line x1="${xx.toFixed(1)}" y1="30" x2="${xx.toFixed(1)}" y2="${bottom + 4 + i * 16}" stroke="${m.color}" stroke-dasharray="4 3"/><text x="${(xx + 4).toFixed(1)}" y="${bottom + 14 + i * 16}" class="wf-mark" style="fill:${m.color}">${esc(m.label)}</text>`);
  });
  const height = bottom + 16 + marks.length * 16;
  // Classes of its own: the page around it (the demo's report) has its own .sub, .tick, .grid, .mark.
  const style = `<style>.wf text{font-family:system-ui,sans-serif;font-size:13px;fill:#222}.wf .wf-name{font-weight:600}.wf .wf-svc{font-size:12px}.wf .wf-sub{font-size:12px;fill:#555;font-style:italic}`
    + `.wf .wf-seg{font-size:11px;fill:#111}.wf .wf-small{font-size:11px;fill:#444}.wf .wf-dur{font-size:12px;fill:#333}.wf .wf-dur.wf-in{fill:#fff;font-weight:600}.wf .wf-tick{font-size:11px;fill:#777}.wf .wf-grid{stroke:#eee}.wf .wf-mark{font-size:12px;font-weight:600}</style>`;
  return { svg: `<svg class="wf" xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">${style}${parts.join('')}</svg>`, width, height };
}

/** Each span's attributes (the SDKs' own left out), as an HTML table per span. */
export function attributeTables(t: JaegerTrace): string {
  return `<div class="attrgrid">${rows(t).map(({ span: s }) => {
    const service = t.processes[s.processID]?.serviceName ?? '?';
    const kv = s.tags.filter((x) => !HIDDEN.has(x.key)).map((x) => `<tr><td>${esc(x.key)}</td><td>${esc(typeof x.value === 'number' && !Number.isInteger(x.value) ? x.value.toPrecision(4) : String(x.value))}</td></tr>`);
    return `<div class="attrs"><h3>${esc(s.operationName)} <span>${esc(service)}</span></h3><table>${kv.join('') || '<tr><td colspan="2">(none)</td></tr>'}</table></div>`;
  }).join('')}</div>`;
}

/** The attribute tables, ATTRIBUTE_COLUMNS to a row: the height a screenshot needs for them. */
export const ATTRIBUTE_COLUMNS = 3;
export function attributeTablesHeight(t: JaegerTrace): number {
  const counts = rows(t).map(({ span: s }) => Math.max(1, s.tags.filter((x) => !HIDDEN.has(x.key)).length));
  let h = 0;
  for (let i = 0; i < counts.length; i += ATTRIBUTE_COLUMNS) h += 40 + 17 * Math.max(...counts.slice(i, i + ATTRIBUTE_COLUMNS));
  return h;
}

export const ATTRIBUTE_CSS = '.attrgrid{display:grid;grid-template-columns:repeat(3,1fr);column-gap:18px}.attrs{vertical-align:top;margin:0 0 12px 0}.attrs h3{font-size:14px;margin:6px 0}.attrs h3 span{font-weight:400;color:#666}'
  + '.attrs table{border-collapse:collapse;font-size:12px}.attrs td{padding:1px 8px 1px 0;font-family:ui-monospace,monospace;line-height:15px}';
