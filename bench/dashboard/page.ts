// The dashboard as one self-contained HTML page, laid out like Grafana lays it out: its 24-column
// grid from each panel's gridPos, rows as section headers, each time series panel as inline SVG
// with its unit, its stacking and fill, and its legend as a table on the right with the calcs the
// panel asks for. Grafana's dark theme and classic palette, so it reads as the dashboard it is.

import { esc, lineChart, niceTicks, type Series } from '../report/svg.js';
import type { Line, Panel, PanelData } from './panels.js';

export const PAGE_WIDTH = 1600;
const MARGIN = 12;
const GAP = 8;
const ROW_PX = 26;
const HEADER_PX = 100;
const TITLE_PX = 28;

// Grafana's classic palette, in its order.
const PALETTE = ['#7EB26D', '#EAB839', '#6ED0E0', '#EF843C', '#E24D42', '#1F78C1', '#BA43A9', '#705DA0', '#508642', '#CCA300',
  '#447EBC', '#C15C17', '#890F02', '#0A437C', '#6D1F62', '#584477', '#B7DBAB', '#F4D598', '#70DBED', '#F9BA8F', '#F29191', '#82B5D8', '#E5A8E2', '#AEA2E0'];

/** How a unit is shown: values scaled for display, an axis tick and a legend figure. */
interface Unit { scale: number; tick(v: number): string; value(v: number): string }

const trim = (v: number, d: number) => String(Number(v.toFixed(d)));
const digits = (v: number) => (Math.abs(v) >= 100 ? 0 : Math.abs(v) >= 10 ? 1 : 2);

// Grafana's units as the dashboard uses them: seconds shown in ms, ratios as %, rates per second.
const UNITS: Record<string, Unit> = {
  s: { scale: 1000, tick: (v) => (v >= 1000 ? `${trim(v / 1000, 2)} s` : `${trim(v, 2)} ms`), value: (v) => (v >= 1000 ? `${(v / 1000).toFixed(2)} s` : `${v.toFixed(digits(v))} ms`) },
  percentunit: { scale: 100, tick: (v) => `${trim(v, 1)}%`, value: (v) => `${v.toFixed(1)}%` },
  reqps: { scale: 1, tick: (v) => `${trim(v, 2)} req/s`, value: (v) => `${v.toFixed(digits(v))} req/s` },
  short: { scale: 1, tick: (v) => trim(v, 2), value: (v) => v.toFixed(Number.isInteger(v) ? 0 : digits(v)) },
};

function unitOf(p: Panel): Unit {
  const u = p.fieldConfig?.defaults?.unit ?? 'short';
  const unit = UNITS[u];
  if (!unit) throw new Error(`panel "${p.title}": unit ${u} is not drawn (only ${Object.keys(UNITS).join(', ')})`);
  return unit;
}

const CALCS: Record<string, { head: string; of(vs: number[]): number | null }> = {
  lastNotNull: { head: 'Last *', of: (vs) => vs.at(-1) ?? null },
  mean: { head: 'Mean', of: (vs) => (vs.length ? vs.reduce((a, b) => a + b, 0) / vs.length : null) },
  max: { head: 'Max', of: (vs) => (vs.length ? Math.max(...vs) : null) },
};

export interface Mark { atS: number; label: string }

export interface PageInput {
  title: string;
  /** A sentence or two under the title: what was run, how the page was made. */
  subtitle: string;
  panels: PanelData[];
  /** Evaluation times, in seconds since the load started. */
  times: number[];
  marks: Mark[];
  footer: string;
}

/** The page and the height it needs, so the screenshot holds all of it. */
export function buildPage(p: PageInput): { html: string; height: number } {
  const colPx = (PAGE_WIDTH - 2 * MARGIN - 23 * GAP) / 24;
  const width = (w: number) => w * colPx + (w - 1) * GAP;
  const height = (h: number) => h * ROW_PX + (h - 1) * GAP;
  const rows = Math.max(...p.panels.map((d) => d.panel.gridPos.y + d.panel.gridPos.h));
  const xMax = Math.max(...p.times, 1);
  const cells = p.panels.map((d) => {
    const g = d.panel.gridPos;
    const style = `grid-column:${g.x + 1}/span ${g.w};grid-row:${g.y + 1}/span ${g.h}`;
    if (d.panel.type === 'row') return `<div class="row" style="${style}">${esc(d.panel.title)}</div>`;
    return `<div class="panel" style="${style}">${panelHtml(d, width(g.w), height(g.h), p.times, xMax, p.marks)}</div>`;
  });
  const total = Math.ceil(HEADER_PX + height(rows) + 40 + MARGIN);
  const html = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${esc(p.title)}</title><style>${css(colPx)}</style></head><body style="height:${total}px">
<header><h1>${esc(p.title)}</h1><p>${p.subtitle}</p></header>
<main>${cells.join('\n')}</main>
<footer>${p.footer}</footer>
</body></html>
`;
  return { html, height: total };
}

function panelHtml(d: PanelData, w: number, h: number, times: number[], xMax: number, marks: Mark[]): string {
  const panel = d.panel;
  const unit = unitOf(panel);
  const custom = panel.fieldConfig?.defaults?.custom ?? {};
  const stacked = custom.stacking?.mode === 'normal';
  const fill = (custom.fillOpacity ?? 0) / 100;
  const legend = panel.options?.legend ?? {};
  const right = legend.placement === 'right';
  const legendW = right ? Math.round(w * 0.4) : 0;
  const chartW = Math.round(w - legendW - 10);
  const chartH = Math.round(h - TITLE_PX - 8 - (right ? 0 : 22 * Math.min(4, d.lines.length)));
  const colors = d.lines.map((_, i) => PALETTE[i % PALETTE.length]);
  const scaled = d.lines.map((l) => l.values.map((v) => (v === null ? null : v * unit.scale)));

  // Stacked: each line on top of the sum of those before it (a missing value counts as 0).
  const below = times.map(() => 0);
  const series: Series[] = [];
  scaled.forEach((vs, i) => {
    if (stacked) {
      const base = below.slice();
      const top = vs.map((v, k) => base[k] + (v ?? 0));
      top.forEach((v, k) => { below[k] = v; });
      series.push({ name: d.lines[i].legend, color: colors[i], width: custom.lineWidth ?? 1, fill, base, dots: false, points: times.map((x, k) => ({ x, y: top[k] })) });
      return;
    }
    // Not stacked: a gap where the query had no value, as Grafana leaves one.
    let run: { x: number; y: number }[] = [];
    const flush = () => {
      if (run.length) series.push({ name: d.lines[i].legend, color: colors[i], width: custom.lineWidth ?? 1, fill, dots: run.length === 1, points: run });
      run = [];
    };
    vs.forEach((v, k) => (v === null ? flush() : run.push({ x: times[k], y: v })));
    flush();
  });

  const dataMax = Math.max(0, ...series.flatMap((s) => s.points.map((pt) => pt.y)));
  const fixedMax = panel.fieldConfig?.defaults?.max;
  const ticks = fixedMax !== undefined ? niceTicks(fixedMax * unit.scale, 4) : niceTicks(dataMax || 1, 4);
  const chart = lineChart({
    title: '', width: chartW, height: chartH, pad: { l: 62, r: 12, t: 8, b: 22 },
    x: { min: 0, max: xMax, label: '', ticks: niceTicks(xMax, 4).filter((t) => t <= xMax), format: (v) => `${v} s` },
    y: { min: 0, max: ticks[ticks.length - 1], label: '', ticks, format: unit.tick },
    series, marks: marks.map((m) => ({ x: m.atS, label: m.label })),
  });
  // Grafana's own: the panel's noValue text where its queries return nothing, else "No data".
  const empty = d.lines.length === 0 ? `<div class="nodata">${esc(panel.fieldConfig?.defaults?.noValue ?? 'No data')}</div>` : '';
  return `<div class="ptitle">${esc(panel.title)}</div><div class="pbody${right ? '' : ' bottom'}"><div class="chart" style="width:${chartW}px">${chart}${empty}</div>${legendHtml(d.lines, scaled, colors, legend.calcs ?? [], unit, right ? legendW : w - 12)}</div>`;
}

function legendHtml(lines: Line[], scaled: (number | null)[][], colors: string[], calcs: string[], unit: Unit, w: number): string {
  if (lines.length === 0) return '';
  for (const c of calcs) if (!CALCS[c]) throw new Error(`legend calc ${c} is not drawn (only ${Object.keys(CALCS).join(', ')})`);
  const head = `<tr><th></th>${calcs.map((c) => `<th>${CALCS[c].head}</th>`).join('')}</tr>`;
  const rows = lines.map((l, i) => {
    const vs = scaled[i].filter((v): v is number => v !== null);
    const figures = calcs.map((c) => {
      const v = CALCS[c].of(vs);
      return `<td>${v === null ? '–' : esc(unit.value(v))}</td>`;
    });
    return `<tr><td class="name"><i style="background:${colors[i]}"></i>${esc(l.legend)}</td>${figures.join('')}</tr>`;
  });
  return `<table class="legend" style="width:${w}px">${head}${rows.join('')}</table>`;
}

function css(colPx: number): string {
  return `
*{box-sizing:border-box}
body{margin:0;padding:0 ${MARGIN}px;background:#111217;color:#ccccdc;font:13px/1.35 'Liberation Sans','DejaVu Sans',Arial,sans-serif;width:${PAGE_WIDTH}px;overflow:hidden}
header{height:${HEADER_PX}px;padding:12px 2px 0}
h1{font-size:20px;font-weight:500;margin:0 0 6px;color:#d8d9da}
header p{margin:0 0 4px;color:rgba(204,204,220,.7);font-size:12.5px;max-width:1560px}
header code,footer code{font-family:'DejaVu Sans Mono',monospace;font-size:11.5px;color:#d8d9da}
main{display:grid;grid-template-columns:repeat(24,${colPx.toFixed(3)}px);grid-auto-rows:${ROW_PX}px;gap:${GAP}px}
.row{font-size:15px;font-weight:500;color:#d8d9da;align-self:end;padding:0 2px 2px}
.panel{background:#181b1f;border:1px solid rgba(204,204,220,.12);border-radius:2px;overflow:hidden;padding:0 6px}
.ptitle{height:${TITLE_PX}px;line-height:${TITLE_PX}px;font-size:13px;font-weight:500;color:#ccccdc;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.pbody{display:flex;gap:10px}.pbody.bottom{flex-direction:column}
.chart{position:relative;flex:none}
.chart svg{display:block;font-family:inherit}
.nodata{position:absolute;inset:0;display:flex;align-items:center;justify-content:center;color:rgba(204,204,220,.6);font-size:16px}
.title{fill:#ccccdc}.tick{font-size:11px;fill:rgba(204,204,220,.65)}.axis{fill:rgba(204,204,220,.65)}
.grid{stroke:rgba(204,204,220,.09);stroke-width:1}
.mark{stroke:rgba(255,120,10,.45)}.marklabel{font-size:10.5px;fill:rgba(255,160,80,.9)}
table.legend{border-collapse:collapse;table-layout:fixed;font-size:10.5px;align-self:flex-start}
.legend th{font-weight:500;color:#6e9fff;text-align:right;padding:0 4px 2px;white-space:nowrap;width:68px}
.legend th:first-child{width:auto}
.legend td{padding:0 4px;height:14px;line-height:13px;text-align:right;white-space:nowrap;color:#ccccdc;border-top:1px solid rgba(204,204,220,.07)}
.legend td.name{text-align:left;overflow:hidden;text-overflow:ellipsis}
.legend i{display:inline-block;width:12px;height:3px;border-radius:1px;margin:0 6px 3px 0;vertical-align:middle}
footer{margin-top:14px;color:rgba(204,204,220,.6);font-size:12px}`;
}
