import { percentile } from '../../src/probe/stats.js';

export interface Percentiles {
  n: number;
  p50: number;
  p90: number;
  p99: number;
}

export function percentiles(values: readonly number[]): Percentiles {
  const s = [...values].sort((a, b) => a - b);
  if (s.length === 0) return { n: 0, p50: NaN, p90: NaN, p99: NaN };
  return { n: s.length, p50: percentile(s, 0.5), p90: percentile(s, 0.9), p99: percentile(s, 0.99) };
}

export const fmt = (v: number, digits = 2) => (Number.isFinite(v) ? v.toFixed(digits) : '-');
