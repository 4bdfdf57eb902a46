// Order statistics for small samples (a handful of trials).

export interface Summary {
  n: number;
  median: number;
  p90: number;
  min: number;
  max: number;
}

/**
 * Percentile by linear interpolation between closest ranks (numpy's default). With five trials,
 * nearest-rank p90 would simply be the max; interpolation keeps p90 distinct from the worst outlier.
 */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) throw new RangeError('percentile of an empty sample');
  const idx = (sorted.length - 1) * p;
  const lo = Math.floor(idx);
  const hi = Math.ceil(idx);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (idx - lo);
}

export function summarize(values: readonly number[]): Summary | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return {
    n: sorted.length,
    median: percentile(sorted, 0.5),
    p90: percentile(sorted, 0.9),
    min: sorted[0],
    max: sorted[sorted.length - 1],
  };
}

export function median(values: readonly number[]): number | null {
  if (values.length === 0) return null;
  return percentile([...values].sort((a, b) => a - b), 0.5);
}
