// The scale report as one self-contained HTML page (the voice report's style and SVG helpers):
// quality and latency against fleet size from the discrete-event rows, cost against fleet size
// from the socket rows, then every table.

import { htmlTable } from './md-table.js';
import { CSS } from '../report/html.js';
import { esc, legend, lineChart, niceTicks, type Series } from '../report/svg.js';
import type { ScaleResult } from './bench.js';
import { desTable, faultTable, fleetGoals, socketTable, validationLine } from './markdown.js';
import type { ScaleRow } from './rows.js';

const PALETTE = ['#1f77b4', '#2a9d8f', '#e76f51', '#6d597a', '#8a8a8a', '#c8372d'];

/** One series per routing (pods, round-robin, oracle) of one kind, y against R. */
function seriesBy(rows: readonly ScaleRow[], y: (r: ScaleRow) => number | null): Series[] {
  const keyOf = (r: ScaleRow) => (r.strategy === 'affinity' ? `${r.kind === 'des' ? 'DES' : 'socket'} ${r.pods} pod${r.pods > 1 ? 's' : ''}` : `${r.kind === 'des' ? 'DES' : 'socket'} ${r.strategy}`);
  const groups = new Map<string, ScaleRow[]>();
  for (const r of rows) {
    const k = keyOf(r);
    groups.set(k, [...(groups.get(k) ?? []), r]);
  }
  return [...groups.entries()].map(([name, rs], i) => {
    // Per fleet size, the row with the most sessions (the sweep's, not a validation row).
    const best = new Map<number, ScaleRow>();
    for (const r of rs) if ((best.get(r.replicas)?.sessions ?? -1) < r.sessions) best.set(r.replicas, r);
    const points = [...best.values()].sort((a, b) => a.replicas - b.replicas).flatMap((r) => {
      const v = y(r);
      return v === null || !Number.isFinite(v) ? [] : [{ x: r.replicas, y: v }];
    });
    return { name, color: PALETTE[i % PALETTE.length], points, dash: name.includes('oracle') || name.includes('round-robin') };
  }).filter((s) => s.points.length > 0);
}

function chart(title: string, yLabel: string, series: Series[], format = (v: number) => String(v)): string {
  if (series.length === 0) return '';
  const xs = series.flatMap((s) => s.points.map((p) => p.x));
  const maxY = Math.max(...series.flatMap((s) => s.points.map((p) => p.y)));
  const xTicks = [...new Set(xs)].sort((a, b) => a - b);
  const svg = lineChart({
    title, width: 960, height: 300,
    x: { min: Math.min(...xs), max: Math.max(...xs), log: xTicks.length > 1, label: 'replicas (R)', ticks: xTicks },
    y: { min: 0, max: niceTicks(maxY).at(-1) ?? 1, label: yLabel, ticks: niceTicks(maxY), format },
    series,
  });
  return `<div class="chart">${svg}${legend(series.map((s) => ({ name: s.name, color: s.color, dash: s.dash })))}</div>`;
}

export function buildScaleHtml(r: ScaleResult): string {
  const des = r.rows.filter((x) => x.kind === 'des');
  const socket = r.rows.filter((x) => x.kind === 'socket');
  const withGateway = socket.filter((x) => x.socket !== undefined && x.kvEvents);
  const goals = fleetGoals(r);
  const badge = (m: boolean | null) => (m === null ? '<span class="badge na">REPORTED</span>' : m ? '<span class="badge met">MET</span>' : '<span class="badge not">NOT MET</span>');
  const title = 'warmroute — scale benchmark';
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${esc(title)}</title><style>${CSS}</style></head><body>
<h1>${esc(title)}</h1>
<p class="sub">${esc(r.when)} · ${r.machine.cpus} × ${esc(r.machine.cpu)} · Node ${esc(r.machine.node)} · load average ${esc(r.machine.loadAverage1m.map((x) => x.toFixed(1)).join(', '))} · ${r.wallS.toFixed(0)} s</p>
<h2>Fleet-size goals</h2>
<ul class="goals">${goals.map((g) => `<li>${badge(g.met)}${esc(g.name)}: ${esc(g.value)}</li>`).join('')}</ul>
<h2>Quality as the fleet grows</h2>
<p class="note">DES rows: the router's own code in virtual time (no sockets); socket rows: real gateway processes. Hit rate: vLLM prefix-cache hits over queries, every replica.</p>
${chart('Prefix-cache hit rate', 'hit rate', seriesBy(r.rows, (x) => x.hitRate), (v) => `${Math.round(v * 100)}%`)}
${chart('TTFT p90', 'ms', seriesBy(r.rows, (x) => x.ttftP90Ms))}
<h2>Cost as the fleet grows (socket rows)</h2>
${chart('Gateway CPU per request (idle work apart)', 'ms', seriesBy(withGateway, (x) => x.socket?.cpuMsPerRequest ?? null), (v) => v.toFixed(1))}
${chart('Idle CPU per pod', 'ms per s', seriesBy(withGateway, (x) => x.socket?.idleCpuMsPerSecond ?? null))}
${chart('RSS per pod', 'MB', seriesBy(withGateway, (x) => x.socket?.rssMbPerPod ?? null))}
<h2>Socket runs</h2>
${htmlTable(socketTable(socket))}
<h2>Discrete-event runs</h2>
${htmlTable(desTable(des))}
<p class="note">${esc(validationLine(r))}</p>
<h2>Faults</h2>
${r.faults.length > 0 ? htmlTable(faultTable(r)) : '<p>not run</p>'}
${r.skipped.length > 0 ? `<p class="note">Skipped (time budget): ${esc(r.skipped.join('; '))}</p>` : ''}
${r.failed.length > 0 ? `<p class="note">Failed steps: ${esc(r.failed.join('; '))}</p>` : ''}
</body></html>
`;
}
