// Small, separately tested pieces of the summary: CDF points, token-weighted hit rates, load ratio.

import { percentiles, type Percentiles } from '../lib/percentiles.js';

export { percentiles, type Percentiles };

/** Empirical CDF: sorted values, each with the share of samples ≤ it. */
export function cdf(values: readonly number[]): { x: number; p: number }[] {
  const s = [...values].sort((a, b) => a - b);
  const out: { x: number; p: number }[] = [];
  for (let i = 0; i < s.length; i++) {
    // Ties collapse to one point at their highest rank, so the curve is a true step function.
    if (i + 1 < s.length && s[i + 1] === s[i]) continue;
    out.push({ x: s[i], p: (i + 1) / s.length });
  }
  return out;
}

/** Σ cached / Σ prompt over the rows that have both (token-weighted, as vLLM's counters are). */
export function hitRate(rows: readonly { promptTokens: number | null; cachedTokens: number | null }[]): number | null {
  let q = 0;
  let h = 0;
  for (const r of rows) {
    if (r.promptTokens === null || r.cachedTokens === null) continue;
    q += r.promptTokens;
    h += r.cachedTokens;
  }
  return q > 0 ? h / q : null;
}

/**
 * Busiest replica over the average, where the average counts every replica of the fleet (one
 * that served nothing pulls the average down, as it should).
 */
export function maxOverAvg(counts: Readonly<Record<string, number>>, replicas: number): number | null {
  const values = Object.values(counts);
  const total = values.reduce((a, b) => a + b, 0);
  if (total === 0 || replicas < 1) return null;
  return Math.max(...values) / (total / replicas);
}

export function countBy<T>(rows: readonly T[], key: (r: T) => string | null): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of rows) {
    const k = key(r);
    if (k !== null) out[k] = (out[k] ?? 0) + 1;
  }
  return out;
}

export function mean(values: readonly number[]): number | null {
  return values.length ? values.reduce((a, b) => a + b, 0) / values.length : null;
}
