// The per-request histograms and counters. prom-client hashes the label object and turns the
// bucket bound into a string key on every observe/inc, label-bound children included: ~3 µs a
// call and a dozen calls a request, the largest JavaScript item of the concurrency-50 profile.
// These keep one series object per label set (found once, then held by the caller) and count
// into typed arrays; the registry reads them at scrape time in prom-client's own shape, so the
// exposition is the same text.

import type { Registry } from 'prom-client';

interface MetricValue {
  labels: Record<string, string | number>;
  value: number;
  metricName?: string;
}

interface RegistryMetric {
  name: string;
  help: string;
  type: 'histogram' | 'counter';
  aggregator: 'sum';
  get(): Promise<{ name: string; help: string; type: string; values: MetricValue[]; aggregator: 'sum' }>;
  reset(): void;
}

function labelObject(names: readonly string[], values: readonly string[]): Record<string, string> {
  if (values.length !== names.length) throw new Error(`expected labels ${names.join(', ')}, got ${values.length} values`);
  const o: Record<string, string> = {};
  names.forEach((n, i) => { o[n] = values[i]; });
  return o;
}

/** One series per label set, made on first use. */
function seriesTable<S>(labelNames: readonly string[], make: (labels: Record<string, string>) => S) {
  const series = new Map<string, S>();
  return {
    of(values: readonly string[]): S {
      const key = values.join('\u0000');
      let s = series.get(key);
      if (s === undefined) series.set(key, (s = make(labelObject(labelNames, values))));
      return s;
    },
    all: () => series.values(),
  };
}

function register(metric: RegistryMetric, registers: readonly Registry[]) {
  // prom-client's registry takes any object with a name and get(): see Registry.registerMetric.
  for (const r of registers) r.registerMetric(metric as unknown as Parameters<Registry['registerMetric']>[0]);
}

export interface HistogramSeries { observe(value: number): void }

export interface FastHistogram extends HistogramSeries {
  labels(...values: string[]): HistogramSeries;
}

export function fastHistogram(cfg: { name: string; help: string; labelNames?: readonly string[]; buckets: readonly number[]; registers: readonly Registry[] }): FastHistogram {
  const bounds = Float64Array.from(cfg.buckets);
  const labelNames = cfg.labelNames ?? [];
  interface Series extends HistogramSeries { readonly labels: Record<string, string>; counts: Float64Array; sum: number; count: number }
  const series = seriesTable<Series>(labelNames, (labels) => {
    const made: Series = {
      labels,
      counts: new Float64Array(bounds.length),
      sum: 0,
      count: 0,
      observe(v: number) {
        if (!Number.isFinite(v)) return;
        made.sum += v;
        made.count++;
        // Buckets are few and most values land in the first ones.
        for (let i = 0; i < bounds.length; i++) {
          if (v <= bounds[i]) { made.counts[i]++; break; }
        }
      },
    };
    return made;
  });
  const seriesOf = series.of;

  const metric: RegistryMetric & FastHistogram = {
    name: cfg.name,
    help: cfg.help,
    type: 'histogram',
    aggregator: 'sum',
    labels: (...values) => seriesOf(values),
    observe: (v) => seriesOf([]).observe(v),
    async get() {
      const values: MetricValue[] = [];
      for (const s of series.all()) {
        // le first, then the series' labels: prom-client's order, so the text is the same.
        let cumulative = 0;
        for (let i = 0; i < bounds.length; i++) {
          cumulative += s.counts[i];
          values.push({ labels: { le: bounds[i], ...s.labels }, value: cumulative, metricName: `${cfg.name}_bucket` });
        }
        values.push({ labels: { le: '+Inf', ...s.labels }, value: s.count, metricName: `${cfg.name}_bucket` });
        values.push({ labels: s.labels, value: s.sum, metricName: `${cfg.name}_sum` });
        values.push({ labels: s.labels, value: s.count, metricName: `${cfg.name}_count` });
      }
      return { name: cfg.name, help: cfg.help, type: 'histogram', values, aggregator: 'sum' };
    },
    reset() {
      for (const s of series.all()) { s.counts.fill(0); s.sum = 0; s.count = 0; }
    },
  };
  // An unlabelled histogram shows its (empty) series from the start, as prom-client's does.
  if (labelNames.length === 0) seriesOf([]);
  register(metric, cfg.registers);
  return metric;
}

export interface CounterSeries { inc(by?: number): void }

export interface FastCounter {
  labels(...values: string[]): CounterSeries;
  inc(labels: Record<string, string>, by?: number): void;
}

export function fastCounter(cfg: { name: string; help: string; labelNames: readonly string[]; registers: readonly Registry[] }): FastCounter {
  interface Series extends CounterSeries { readonly labels: Record<string, string>; value: number }
  const series = seriesTable<Series>(cfg.labelNames, (labels) => {
    const made: Series = {
      labels,
      value: 0,
      inc(by = 1) {
        if (!(by >= 0) || !Number.isFinite(by)) throw new Error(`counter ${cfg.name}: increment by ${by}`);
        made.value += by;
      },
    };
    return made;
  });
  const seriesOf = series.of;

  const metric: RegistryMetric & FastCounter = {
    name: cfg.name,
    help: cfg.help,
    type: 'counter',
    aggregator: 'sum',
    labels: (...values) => seriesOf(values),
    inc: (labels, by) => seriesOf(cfg.labelNames.map((n) => labels[n] ?? '')).inc(by),
    async get() {
      return { name: cfg.name, help: cfg.help, type: 'counter', values: [...series.all()].map((s) => ({ labels: s.labels, value: s.value })), aggregator: 'sum' };
    },
    reset() {
      for (const s of series.all()) s.value = 0;
    },
  };
  register(metric, cfg.registers);
  return metric;
}
