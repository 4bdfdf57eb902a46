// Just enough inline SVG for the reports: axes with ticks, line/step series (filled or stacked
// areas too), stacked bars.
// No chart library: the report must be one self-contained file.

export const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
const n = (v: number) => (Number.isFinite(v) ? Number(v.toFixed(2)) : 0);

export interface Axis {
  min: number;
  max: number;
  log?: boolean;
  label: string;
  ticks: number[];
  format?(v: number): string;
}

export interface Series {
  name: string;
  color: string;
  points: { x: number; y: number }[];
  /** Step function (a CDF) instead of straight segments. */
  step?: boolean;
  dash?: boolean;
  width?: number;
  /** Fill under the line at this opacity (0–1), down to `base` or the x axis. */
  fill?: number;
  /** Per point, the lower edge of the fill: the series below it when areas are stacked. */
  base?: number[];
  /** A dot per point; by default only when there are fewer than 40. */
  dots?: boolean;
}

export interface LineChart {
  title: string;
  width: number;
  height: number;
  x: Axis;
  y: Axis;
  series: Series[];
  /** Vertical reference lines. */
  marks?: { x: number; label: string }[];
  /** Margins around the plot, when the default room for a title and axis labels is not wanted. */
  pad?: Partial<typeof PAD>;
}

const PAD = { l: 56, r: 16, t: 30, b: 44 };

function scaler(a: Axis, from: number, to: number): (v: number) => number {
  const f = (v: number) => (a.log ? Math.log10(Math.max(v, a.min)) : v);
  const lo = f(a.min);
  const hi = f(a.max);
  return (v: number) => from + ((Math.min(Math.max(f(v), lo), hi) - lo) / (hi - lo || 1)) * (to - from);
}

export function niceTicks(max: number, count = 5): number[] {
  if (!(max > 0)) return [0, 1];
  const raw = max / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? raw;
  // Up to the first tick at or above max, so the axis always covers the data.
  const out: number[] = [0];
  while (out[out.length - 1] < max - step * 1e-9 && out.length < 50) out.push(Number((out.length * step).toPrecision(12)));
  return out;
}

export function lineChart(c: LineChart): string {
  const pad = { ...PAD, ...c.pad };
  const sx = scaler(c.x, pad.l, c.width - pad.r);
  const sy = scaler(c.y, c.height - pad.b, pad.t);
  const fx = c.x.format ?? String;
  const fy = c.y.format ?? String;
  const parts: string[] = [];
  parts.push(`<text x="${pad.l}" y="18" class="title">${esc(c.title)}</text>`);
  for (const t of c.x.ticks) {
    const x = n(sx(t));
    parts.push(`<line x1="${x}" y1="${pad.t}" x2="${x}" y2="${c.height - pad.b}" class="grid"/>`);
    parts.push(`<text x="${x}" y="${c.height - pad.b + 16}" text-anchor="middle" class="tick">${esc(fx(t))}</text>`);
  }
  for (const t of c.y.ticks) {
    const y = n(sy(t));
    parts.push(`<line x1="${pad.l}" y1="${y}" x2="${c.width - pad.r}" y2="${y}" class="grid"/>`);
    parts.push(`<text x="${pad.l - 6}" y="${y + 4}" text-anchor="end" class="tick">${esc(fy(t))}</text>`);
  }
  parts.push(`<text x="${(pad.l + c.width - pad.r) / 2}" y="${c.height - 8}" text-anchor="middle" class="axis">${esc(c.x.label)}</text>`);
  parts.push(`<text transform="translate(14 ${(pad.t + c.height - pad.b) / 2}) rotate(-90)" text-anchor="middle" class="axis">${esc(c.y.label)}</text>`);
  for (const m of c.marks ?? []) {
    const x = n(sx(m.x));
    parts.push(`<line x1="${x}" y1="${pad.t}" x2="${x}" y2="${c.height - pad.b}" class="mark"/>`);
    parts.push(`<text x="${x + 4}" y="${pad.t + 12}" class="marklabel">${esc(m.label)}</text>`);
  }
  for (const s of c.series) {
    if (s.points.length === 0) continue;
    if (s.fill && !s.step) {
      const top = s.points.map((p) => `${n(sx(p.x))} ${n(sy(p.y))}`);
      const bottom = s.points.map((p, i) => `${n(sx(p.x))} ${n(sy(s.base?.[i] ?? c.y.min))}`).reverse();
      parts.push(`<path d="M${[...top, ...bottom].join(' L')} Z" fill="${s.color}" fill-opacity="${s.fill}" stroke="none"/>`);
    }
    let d = '';
    s.points.forEach((p, i) => {
      const x = n(sx(p.x));
      const y = n(sy(p.y));
      if (i === 0) d += `M${x} ${s.step ? n(sy(0)) : y}${s.step ? ` L${x} ${y}` : ''}`;
      else if (s.step) d += ` L${x} ${n(sy(s.points[i - 1].y))} L${x} ${y}`;
      else d += ` L${x} ${y}`;
    });
    parts.push(`<path d="${d}" fill="none" stroke="${s.color}" stroke-width="${s.width ?? 2}"${s.dash ? ' stroke-dasharray="5 4"' : ''}><title>${esc(s.name)}</title></path>`);
    if (!s.step && (s.dots ?? s.points.length < 40)) {
      for (const p of s.points) parts.push(`<circle cx="${n(sx(p.x))}" cy="${n(sy(p.y))}" r="${s.dash ? 2 : 3}" fill="${s.color}"/>`);
    }
  }
  return svg(c.width, c.height, parts);
}

export interface Bars {
  title: string;
  width: number;
  rows: { label: string; segments: { name: string; value: number; color: string }[] }[];
  unit: string;
  digits?: number;
}

export function stackedBars(b: Bars): string {
  const rowH = 26;
  const labelW = 230;
  const height = PAD.t + b.rows.length * (rowH + 10) + 54;
  const totals = b.rows.map((r) => r.segments.reduce((s, x) => s + Math.max(0, x.value), 0));
  const max = Math.max(...totals, 1e-9);
  const ticks = niceTicks(max, 5);
  const top = ticks[ticks.length - 1] || max;
  const sx = (v: number) => labelW + (v / top) * (b.width - labelW - PAD.r - 70);
  const digits = b.digits ?? 1;
  const parts: string[] = [`<text x="8" y="18" class="title">${esc(b.title)}</text>`];
  const axisY = PAD.t + b.rows.length * (rowH + 10);
  for (const t of ticks) {
    parts.push(`<line x1="${n(sx(t))}" y1="${PAD.t - 4}" x2="${n(sx(t))}" y2="${axisY}" class="grid"/>`);
    parts.push(`<text x="${n(sx(t))}" y="${axisY + 14}" text-anchor="middle" class="tick">${t}</text>`);
  }
  parts.push(`<text x="${n((labelW + b.width) / 2)}" y="${axisY + 30}" text-anchor="middle" class="axis">${esc(b.unit)}</text>`);
  b.rows.forEach((r, i) => {
    const y = PAD.t + i * (rowH + 10);
    parts.push(`<text x="${labelW - 8}" y="${y + rowH / 2 + 4}" text-anchor="end" class="label">${esc(r.label)}</text>`);
    let at = 0;
    for (const s of r.segments) {
      const v = Math.max(0, s.value);
      const w = n(sx(at + v) - sx(at));
      parts.push(`<rect x="${n(sx(at))}" y="${y}" width="${w}" height="${rowH}" fill="${s.color}"><title>${esc(`${s.name}: ${v.toFixed(digits + 2)} ${b.unit}`)}</title></rect>`);
      at += v;
    }
    parts.push(`<text x="${n(sx(at)) + 6}" y="${y + rowH / 2 + 4}" class="label">${at.toFixed(digits)}</text>`);
  });
  // Legend from the first row's segment names and colours.
  let lx = labelW;
  for (const s of b.rows[0]?.segments ?? []) {
    parts.push(`<rect x="${lx}" y="${axisY + 38}" width="10" height="10" fill="${s.color}"/><text x="${lx + 14}" y="${axisY + 47}" class="tick">${esc(s.name)}</text>`);
    lx += 26 + s.name.length * 7.5;
  }
  return svg(b.width, height + 12, parts);
}

function svg(w: number, h: number, parts: string[]): string {
  return `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${w} ${h}" width="${w}" height="${h}" role="img">${parts.join('')}</svg>`;
}

export function legend(items: { name: string; color: string; dash?: boolean }[]): string {
  return `<div class="legend">${items.map((i) => `<span><svg width="26" height="10"><line x1="0" y1="5" x2="26" y2="5" stroke="${i.color}" stroke-width="3"${i.dash ? ' stroke-dasharray="5 4"' : ''}/></svg>${esc(i.name)}</span>`).join('')}</div>`;
}
