// Figures read from Prometheus text (a gateway's or a replica's /metrics), on the dashboard's own
// parser (parsePromText) and Prometheus's histogram_quantile (bucketQuantile).

import { bucketQuantile, type Labels, type Sample } from '../dashboard/promql.js';
import { parsePromText } from '../dashboard/scrape.js';

/** Every sample of `name` in one or more /metrics texts. */
function samplesOf(texts: string | readonly string[], name: string): Sample[] {
  return (typeof texts === 'string' ? [texts] : texts).flatMap((t) => parsePromText(t).filter((s) => s.labels.__name__ === name));
}

/** The sample's labels but `__name__` and `omit`, for exact matching. */
function labelsBut(l: Labels, omit: string): Labels {
  return Object.fromEntries(Object.entries(l).filter(([k]) => k !== '__name__' && k !== omit));
}

const sameLabels = (a: Labels, b: Labels) => {
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length && ka.every((k) => a[k] === b[k]);
};

/** Sum of every sample of a metric (all label sets), over one or more texts. */
export function sumSamples(texts: string | readonly string[], name: string): number {
  return samplesOf(texts, name).reduce((s, x) => s + x.value, 0);
}

/** One label's value → the sum of the samples carrying it, over one or more texts. */
export function sumBy(texts: string | readonly string[], name: string, label: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const s of samplesOf(texts, name)) {
    const v = s.labels[label];
    if (v !== undefined) out[v] = (out[v] ?? 0) + s.value;
  }
  return out;
}

/**
 * histogram_quantile over the `${name}_bucket` series whose labels (le aside) are exactly
 * `labels`, their counts summed bucket by bucket over every text given (several processes'
 * /metrics: the quantile of all their observations together, as `sum by (le)` would give).
 * Null with no such series, no observations or no +Inf bucket.
 */
export function histogramQuantile(texts: string | readonly string[], name: string, q: number, labels: Labels = {}): number | null {
  const byLe = new Map<number, number>();
  for (const s of samplesOf(texts, `${name}_bucket`)) {
    if (s.labels.le === undefined || !sameLabels(labelsBut(s.labels, 'le'), labels)) continue;
    const le = s.labels.le === '+Inf' ? Infinity : Number(s.labels.le);
    byLe.set(le, (byLe.get(le) ?? 0) + s.value);
  }
  const v = bucketQuantile(q, [...byLe].map(([le, count]) => ({ le, count })));
  return Number.isNaN(v) ? null : v;
}
