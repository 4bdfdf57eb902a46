/** histogram_quantile over a Prometheus text histogram (one label set), linear within a bucket. */
export function histogramQuantile(metricsText: string, name: string, q: number, labelFilter = ''): number | null {
  const buckets: { le: number; count: number }[] = [];
  const re = new RegExp(`^${name}_bucket\\{([^}]*)\\} (\\S+)$`, 'gm');
  for (const m of metricsText.matchAll(re)) {
    if (labelFilter && !m[1].includes(labelFilter)) continue;
    const le = /le="([^"]+)"/.exec(m[1])![1];
    buckets.push({ le: le === '+Inf' ? Infinity : Number(le), count: Number(m[2]) });
  }
  if (buckets.length === 0) return null;
  buckets.sort((a, b) => a.le - b.le);
  const total = buckets[buckets.length - 1].count;
  if (total === 0) return null;
  const rank = q * total;
  let prevLe = 0;
  let prevCount = 0;
  for (const b of buckets) {
    if (b.count >= rank) {
      if (b.le === Infinity) return prevLe;
      return prevLe + (b.le - prevLe) * ((rank - prevCount) / Math.max(1, b.count - prevCount));
    }
    prevLe = b.le;
    prevCount = b.count;
  }
  return prevLe;
}
