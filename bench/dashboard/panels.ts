// The Grafana dashboard file read as what it draws: its panels, where they sit, their units and
// stacking, and each query evaluated over the scrapes into one line per legend. The file is the
// only source of the queries; nothing here repeats one.

import { readFileSync } from 'node:fs';
import { legendOf, Query, type EvalOptions, type Tsdb } from './promql.js';

export const DASHBOARD_FILE = 'deploy/grafana/warmroute.json';

export interface GridPos { x: number; y: number; w: number; h: number }

export interface Target { refId: string; expr: string; legendFormat?: string }

export interface Panel {
  type: string;
  title: string;
  gridPos: GridPos;
  panels?: Panel[];
  targets?: Target[];
  fieldConfig?: { defaults?: { unit?: string; min?: number; max?: number; noValue?: string; custom?: { stacking?: { mode?: string }; fillOpacity?: number; lineWidth?: number } } };
  options?: { legend?: { displayMode?: string; placement?: string; calcs?: string[] } };
}

export interface Dashboard { title: string; panels: Panel[] }

export function loadDashboard(file = DASHBOARD_FILE): Dashboard {
  return JSON.parse(readFileSync(file, 'utf8')) as Dashboard;
}

/** Rows and graph panels in layout order; a row's own panels (when collapsed) follow it. */
export function panelsOf(d: Dashboard): Panel[] {
  const all = d.panels.flatMap((p) => [p, ...(p.panels ?? [])]);
  for (const p of all) {
    if (p.type !== 'row' && p.type !== 'timeseries') throw new Error(`panel "${p.title}": type ${p.type} is not drawn (only timeseries and rows)`);
  }
  return all;
}

/** Every query of the dashboard, compiled: throws (naming the expression) if one is outside the subset. */
export function compileAll(d: Dashboard, o: EvalOptions): Map<Target, Query> {
  const out = new Map<Target, Query>();
  for (const p of panelsOf(d)) for (const t of p.targets ?? []) out.set(t, new Query(t.expr, o));
  return out;
}

export interface Line {
  legend: string;
  /** Aligned with the evaluation times; null where the query had no value (or NaN/±Inf). */
  values: (number | null)[];
}

export interface PanelData {
  panel: Panel;
  lines: Line[];
  /** Metric names the panel reads that have no series at all in the scrapes. */
  missing: string[];
}

/** Each target evaluated at every time; one line per label set, named by the legend format, in target order. */
export function evaluatePanel(panel: Panel, queries: Map<Target, Query>, db: Tsdb, times: readonly number[]): PanelData {
  const lines: Line[] = [];
  const names = db.names();
  const missing = new Set<string>();
  for (const target of panel.targets ?? []) {
    const q = queries.get(target)!;
    for (const m of q.metrics()) if (!names.has(m)) missing.add(m);
    const byLabels = new Map<string, Line>();
    times.forEach((t, i) => {
      for (const s of q.at(db, t)) {
        const k = JSON.stringify(s.labels);
        let line = byLabels.get(k);
        if (!line) byLabels.set(k, (line = { legend: legendOf(target.legendFormat, s.labels), values: times.map(() => null) }));
        line.values[i] = Number.isFinite(s.value) ? s.value : null;
      }
    });
    // Prometheus returns series in label order; a line with no value at all is not drawn.
    const sorted = [...byLabels.values()].filter((l) => l.values.some((v) => v !== null)).sort((a, b) => a.legend.localeCompare(b.legend));
    lines.push(...sorted);
  }
  return { panel, lines, missing: [...missing] };
}
