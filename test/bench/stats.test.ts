import assert from 'node:assert/strict';
import { test } from 'node:test';
import { cdf, hitRate, maxOverAvg, percentiles } from '../../bench/voice/stats.js';

test('percentiles interpolate between closest ranks (numpy default)', () => {
  const p = percentiles([5, 1, 4, 2, 3]);
  assert.equal(p.n, 5);
  assert.equal(p.p50, 3);
  assert.equal(p.p90, 4.6); // rank 3.6 between 4 and 5
  assert.ok(Math.abs(p.p99 - 4.96) < 1e-9);
  const hundred = percentiles(Array.from({ length: 100 }, (_, i) => i + 1));
  assert.ok(Math.abs(hundred.p90 - 90.1) < 1e-9);
  assert.ok(Number.isNaN(percentiles([]).p50));
});

test('cdf is a step function ending at 1, ties collapsed', () => {
  assert.deepEqual(cdf([3, 1, 2, 2]), [{ x: 1, p: 0.25 }, { x: 2, p: 0.75 }, { x: 3, p: 1 }]);
  assert.deepEqual(cdf([]), []);
  const c = cdf([10, 10, 10]);
  assert.deepEqual(c, [{ x: 10, p: 1 }]);
});

test('hit rate is token-weighted and skips rows without usage', () => {
  const rows = [
    { promptTokens: 1000, cachedTokens: 900 },
    { promptTokens: 100, cachedTokens: 0 },
    { promptTokens: null, cachedTokens: null },
  ];
  assert.equal(hitRate(rows), 900 / 1100);
  assert.equal(hitRate([]), null);
});

test('max/avg load counts replicas that served nothing in the average', () => {
  assert.equal(maxOverAvg({ a: 10, b: 10, c: 10, d: 10 }, 4), 1);
  assert.equal(maxOverAvg({ a: 20, b: 10, c: 10 }, 4), 2); // d served none: avg 10
  assert.equal(maxOverAvg({}, 4), null);
});

test('axis ticks always reach the data maximum', async () => {
  const { niceTicks } = await import('../../bench/report/svg.js');
  for (const max of [0.3, 1, 7, 97.4, 103.1, 125, 999, 1001, 86.2]) {
    const t = niceTicks(max, 5);
    assert.equal(t[0], 0);
    assert.ok(t[t.length - 1] >= max, `${max}: ${t.join(',')}`);
    assert.ok(t.length <= 8, `${max}: ${t.join(',')}`);
  }
});
