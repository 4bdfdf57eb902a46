/**
 * bench:dashboard's PromQL subset against values computed by hand (Prometheus's semantics: left-open
 * windows, extrapolated rate, interpolated histogram_quantile, staleness), and the dashboard file
 * against the evaluator and the page: every query it has must compile, every panel must draw.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { buildPage } from '../../bench/dashboard/page.js';
import { compileAll, evaluatePanel, loadDashboard, panelsOf } from '../../bench/dashboard/panels.js';
import { bucketQuantile, extrapolatedIncrease, legendOf, Query, Tsdb, type Sample, type Scrape } from '../../bench/dashboard/promql.js';
import { parsePromText } from '../../bench/dashboard/scrape.js';

const O = { rateIntervalS: 8 };
const s = (name: string, labels: Record<string, string>, value: number): Sample => ({ labels: { __name__: name, ...labels }, value });
const scrape = (t: number, instance: string, samples: Sample[], ok = true): Scrape => ({ t, target: { job: 'warmroute', instance }, ok, samples });
/** One target, scraped every 2 s from t=0 to 8: `at(t)` gives that scrape's samples. */
const every2s = (instance: string, at: (t: number) => Sample[]) => [0, 2, 4, 6, 8].map((t) => scrape(t, instance, at(t)));
const eval1 = (expr: string, scrapes: Scrape[], t = 8) => new Query(expr, O).at(new Tsdb(scrapes), t);
const close = (a: number, b: number, msg?: string) => assert.ok(Math.abs(a - b) < 1e-9, `${msg ?? ''} ${a} ≠ ${b}`);

describe('bench:dashboard PromQL subset: rate and increase', () => {
  it('a steady counter: 10 every 2 s is 5/s, and 40 over 8 s (the window (0, 8] extrapolated to its start)', () => {
    const x = every2s('a', (t) => [s('x_total', {}, 5 * t)]);
    close(eval1('rate(x_total[8s])', x)[0].value, 5);
    close(eval1('increase(x_total[8s])', x)[0].value, 40);
    // rate/increase drop the metric name, keep the rest.
    assert.deepEqual(eval1('rate(x_total[8s])', x)[0].labels, { job: 'warmroute', instance: 'a' });
  });

  it('a counter reset adds the value before it back', () => {
    // Samples in (0, 8]: 10, 20, 5, 15 → 10 + 5 + 10 = 25 counted; extrapolated by 8/6 (first sample 2 s from the start).
    const v: Record<number, number> = { 0: 0, 2: 10, 4: 20, 6: 5, 8: 15 };
    close(eval1('increase(x_total[8s])', every2s('a', (t) => [s('x_total', {}, v[t])])).at(0)!.value, 25 * 8 / 6);
  });

  it('a label set that appears mid-window with its first increments in it: those are lost, the rest extrapolated half an interval', () => {
    // Samples at 4, 6, 8: 100, 110, 120. Increase 20 over 4 s; the start is 4 s away (> 1.1 × 2 s), so
    // extrapolated by 1 s only: 20 × 5/4 = 25, rate 25/8.
    const x = every2s('a', (t) => (t >= 4 ? [s('x_total', {}, 100 + 5 * (t - 4))] : []));
    close(eval1('rate(x_total[8s])', x)[0].value, 25 / 8);
    assert.equal(extrapolatedIncrease([{ t: 8, v: 120 }], 0, 8), null, 'one sample: no rate');
  });

  it('never extrapolates a counter below zero', () => {
    // 1, 3, 5, 7 at 2, 4, 6, 8 over (0, 8]: the start is 2 s away, but the counter would reach zero
    // 1 s before the first sample, so 6 is extrapolated by 1 s, not 2.
    close(extrapolatedIncrease([{ t: 2, v: 1 }, { t: 4, v: 3 }, { t: 6, v: 5 }, { t: 8, v: 7 }], 0, 8)!, 6 * (6 + 1) / 6);
  });

  it('the window is left-open: a sample exactly at t − range is out', () => {
    // At t=8 with [6s] the window is (2, 8]: 20, 30, 40 at 4, 6, 8 (the 1000 at t=2 would be a reset),
    // 20 over 4 s extrapolated 2 s to the start.
    const x = every2s('a', (t) => [s('x_total', {}, t === 2 ? 1000 : 5 * t)]);
    close(eval1('increase(x_total[6s])', x)[0].value, 20 * 6 / 4);
  });
});

describe('bench:dashboard PromQL subset: histogram_quantile', () => {
  it('interpolates within the bucket the rank falls in, from 0 in the first', () => {
    const b = [{ le: 0.1, count: 10 }, { le: 0.5, count: 30 }, { le: 1, count: 40 }, { le: Infinity, count: 40 }];
    close(bucketQuantile(0.5, b), 0.1 + 0.4 * (10 / 20));
    close(bucketQuantile(0.99, b), 0.5 + 0.5 * (9.6 / 10));
    close(bucketQuantile(0.1, b), 0.1 * (4 / 10));
    // Ranks in +Inf answer with the highest finite bound; nothing observed is NaN; no +Inf bucket is NaN.
    assert.equal(bucketQuantile(0.5, [{ le: 0.1, count: 0 }, { le: 1, count: 0 }, { le: Infinity, count: 5 }]), 1);
    assert.ok(Number.isNaN(bucketQuantile(0.5, [{ le: 0.1, count: 0 }, { le: Infinity, count: 0 }])));
    assert.ok(Number.isNaN(bucketQuantile(0.5, [{ le: 0.1, count: 1 }, { le: 1, count: 2 }])));
    // Buckets out of order, and one below the bucket before it (rates of separate series jitter):
    // sorted, then 0.5's 30 raised to 0.1's 31, so the rank 20 falls in the first bucket.
    close(bucketQuantile(0.5, [{ le: Infinity, count: 40 }, { le: 1, count: 39 }, { le: 0.5, count: 30 }, { le: 0.1, count: 31 }]), 0.1 * (20 / 31));
  });

  it('sum by (le, route) over two instances, from rates of bucket counters', () => {
    // Per instance and route the buckets grow at 5, 15, 20, 20 per second (counts 5t, 15t, 20t, 20t); two
    // instances → rates 10, 30, 40, 40: p50 0.3, as above. Route b is twice as slow: le 0.5 holds none.
    const buckets = (route: string, per: number[]) => (t: number) => ['0.1', '0.5', '1', '+Inf'].map((le, i) => s('ttft_bucket', { route, le }, per[i] * t));
    const at = (t: number) => [...buckets('a', [5, 15, 20, 20])(t), ...buckets('b', [0, 0, 10, 10])(t)];
    const x = [...every2s('i1', at), ...every2s('i2', at)];
    const out = eval1('histogram_quantile(0.5, sum by (le, route) (rate(ttft_bucket{job=~"$job"}[$__rate_interval])))', x);
    const by = Object.fromEntries(out.map((o) => [o.labels.route, o.value]));
    assert.deepEqual(out.map((o) => Object.keys(o.labels)), [['route'], ['route']], 'le and the rest are gone');
    close(by.a, 0.3);
    close(by.b, 0.5 + 0.5 * 0.5);
    const all = eval1('histogram_quantile(0.99, sum by (le) (rate(ttft_bucket[8s])))', x);
    // Rates summed over routes: 10, 30, 60, 60 → rank 59.4 in (0.5, 1]: 0.5 + 0.5 × 29.4/30.
    close(all[0].value, 0.5 + 0.5 * (29.4 / 30));
    assert.deepEqual(all[0].labels, {});
  });
});

describe('bench:dashboard PromQL subset: aggregation, ratios, scalar, matchers, gauges', () => {
  const counters = (t: number) => [
    s('hop_sum', { hop: 'route' }, 0.002 * t), s('hop_sum', { hop: 'connect' }, 0.01 * t), s('hop_sum', { hop: 'stream' }, 5 * t),
    s('ttft_count', { route: 'pinned' }, 3 * t), s('ttft_count', { route: 'placed' }, 1 * t),
    s('cached_total', { replica: 'r1' }, 90 * t), s('prompt_total', { replica: 'r1' }, 100 * t),
    s('cached_total', { replica: 'r2' }, 0 * t), s('prompt_total', { replica: 'r2' }, 100 * t),
  ];
  const x = [...every2s('g1', counters), ...every2s('g2', counters)];

  it('sum by (hop) / scalar(sum(...)): the mean per request of each hop, != dropping one', () => {
    const out = eval1('sum by (hop) (rate(hop_sum{job=~"$job",hop!="stream"}[$__rate_interval])) / scalar(sum(rate(ttft_count{job=~"$job"}[$__rate_interval])))', x);
    const by = Object.fromEntries(out.map((o) => [o.labels.hop, o.value]));
    assert.deepEqual(Object.keys(by).sort(), ['connect', 'route']);
    // Two gateways: 2 × 0.01 s/s of connect over 2 × 4 requests/s.
    close(by.connect, 0.02 / 8);
    close(by.route, 0.004 / 8);
  });

  it('a ratio of two sums matches their (empty) label sets one to one', () => {
    const out = eval1('sum(rate(cached_total[8s])) / sum(rate(prompt_total[8s]))', x);
    assert.equal(out.length, 1);
    close(out[0].value, (2 * 90) / (2 * 200));
    // By replica: each matched with its own.
    const per = eval1('sum by (replica) (rate(cached_total[8s])) / sum by (replica) (rate(prompt_total[8s]))', x);
    const by = Object.fromEntries(per.map((o) => [o.labels.replica, o.value]));
    assert.deepEqual(Object.keys(by).sort(), ['r1', 'r2']);
    close(by.r1, 0.9);
    close(by.r2, 0);
  });

  it('scalar() of anything but one sample is NaN', () => {
    assert.ok(Number.isNaN(eval1('sum(rate(hop_sum[8s])) / scalar(sum by (route) (rate(ttft_count[8s])))', x)[0].value));
  });

  it('matchers: =, != and =~ (anchored), and $job matches every job', () => {
    const g = [scrape(8, 'a', [s('up', { replica: 'r1' }, 1), s('up', { replica: 'r2' }, 0), s('up', { replica: 'r10' }, 1)])];
    const names = (e: string) => eval1(e, g).map((o) => o.labels.replica).sort();
    assert.deepEqual(names('up{replica="r1"}'), ['r1']);
    assert.deepEqual(names('up{replica!="r1"}'), ['r10', 'r2']);
    assert.deepEqual(names('up{replica=~"r1"}'), ['r1'], 'anchored');
    assert.deepEqual(names('up{replica=~"r1.*"}'), ['r1', 'r10']);
    assert.deepEqual(names('up{job=~"$job"}'), ['r1', 'r10', 'r2']);
    assert.deepEqual(names('up{job="vllm"}'), []);
    assert.deepEqual(names('up{missing=""}'), ['r1', 'r10', 'r2'], 'an absent label is the empty string');
  });

  it('gauges: the latest scrape at or before t; stale when that scrape failed or lacked the series', () => {
    const g = [
      scrape(0, 'a', [s('inflight', { replica: 'r1' }, 3), s('inflight', { replica: 'r2' }, 4)]),
      scrape(2, 'a', [s('inflight', { replica: 'r1' }, 5)]),
      scrape(0, 'b', [s('inflight', { replica: 'r1' }, 7)]),
      scrape(2, 'b', [], false),
    ];
    const at = (e: string, t: number) => Object.fromEntries(eval1(e, g, t).map((o) => [o.labels.replica, o.value]));
    assert.deepEqual(at('sum by (replica) (inflight)', 1), { r1: 10, r2: 4 });
    assert.deepEqual(at('sum by (replica) (inflight)', 3), { r1: 5 }, 'r2 left a\'s scrape, b is down');
    assert.deepEqual(at('max by (replica) (inflight)', 0), { r1: 7, r2: 4 });
    assert.deepEqual(at('min by (replica) (inflight)', 0), { r1: 3, r2: 4 });
  });

  it('legends fill {{label}} from the series (a missing label is empty)', () => {
    assert.equal(legendOf('p50 {{route}}', { route: 'pinned' }), 'p50 pinned');
    assert.equal(legendOf('ejected {{replica}} ({{ cause }})', { replica: 'r1' }), 'ejected r1 ()');
    assert.equal(legendOf(undefined, { a: 'x' }), '{a="x"}');
  });

  it('> NUMBER keeps the samples above it (labels kept) and drops NaN: series of what happened only', () => {
    const x = every2s('a', (t) => [s('x_total', { reason: 'pinned' }, 5 * t), s('x_total', { reason: 'spill' }, 0)]);
    assert.deepEqual(eval1('sum by (reason) (rate(x_total[8s])) > 0', x).map((v) => v.labels), [{ reason: 'pinned' }]);
    const empty = every2s('a', () => [s('h_bucket', { le: '1' }, 0), s('h_bucket', { le: '+Inf' }, 0)]);
    assert.deepEqual(eval1('histogram_quantile(0.9, sum by (le) (rate(h_bucket[8s]))) > 0', empty), []);
  });
});

describe('bench:dashboard PromQL subset: anything else throws, naming the expression', () => {
  for (const expr of [
    'avg(x)', 'sum(x) by (a)', 'sum without (a) (x)', 'x * 2', 'x + y', 'rate(x[5m]) offset 1m', 'x{a!~"b"}', 'x[5m]',
    'irate(x[1m])', 'histogram_quantile(0.5, rate(x_bucket[1m]))', 'histogram_quantile(0.5, sum by (route) (rate(x_bucket[1m])))',
    'sum(rate(x[$__interval]))', 'x{a="$instance"}', '(x)', 'rate(x[1w])', 'sum(x) / 2', 'x > y', 'x > 0 > 1',
  ]) {
    it(expr, () => assert.throws(() => new Query(expr, O), (e: Error) => e.message.startsWith('PromQL subset: ') && e.message.endsWith(` in ${expr}`)));
  }
});

describe('the Prometheus text format', () => {
  it('samples with labels, escapes, special values and timestamps; comments skipped', () => {
    const out = parsePromText([
      '# HELP x_total Some help',
      '# TYPE x_total counter',
      'x_total{a="1",b="q\\"uote\\\\d"} 3 1700000000000',
      'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25',
      'h_bucket{le="+Inf"} +Inf',
      'nan_metric NaN',
      '',
    ].join('\n'));
    assert.deepEqual(out[0], { labels: { __name__: 'x_total', a: '1', b: 'q"uote\\d' }, value: 3 });
    assert.deepEqual(out[1].labels, { __name__: 'vllm:kv_cache_usage_perc', engine: '0', model_name: 'm' });
    assert.equal(out[2].value, Infinity);
    assert.ok(Number.isNaN(out[3].value));
    assert.equal(out.length, 4);
  });
});

describe('deploy/grafana/warmroute.json and the renderer agree', () => {
  const dashboard = loadDashboard();

  it('every expression in the dashboard is inside the subset', () => {
    const queries = compileAll(dashboard, O);
    const count = panelsOf(dashboard).reduce((n, p) => n + (p.targets?.length ?? 0), 0);
    assert.equal(queries.size, count);
    assert.ok(count >= 20, `${count} queries`);
  });

  it('every panel draws (type, unit, legend calcs, grid), with or without data', () => {
    const queries = compileAll(dashboard, O);
    const db = new Tsdb(every2s('g', (t) => [s('warmroute_route_decisions_total', { reason: 'pinned' }, 4 * t)]));
    const times = [2, 4, 6, 8];
    const panels = panelsOf(dashboard).map((p) => (p.type === 'row' ? { panel: p, lines: [], missing: [] } : evaluatePanel(p, queries, db, times)));
    const { html, height } = buildPage({ title: 't', subtitle: '', panels, times, marks: [{ atS: 4, label: 'm' }], footer: '' });
    const graphs = panels.filter((p) => p.panel.type !== 'row');
    assert.equal(html.match(/<svg /g)?.length, graphs.length, 'one chart per graph panel');
    assert.equal(html.match(/class="nodata"/g)?.length, graphs.length - 1, 'only the decisions panel has data');
    // A panel's own noValue text replaces "No data": the KV panels say events are off.
    assert.match(html, /<div class="nodata">KV events off: no replica publishes them/);
    assert.ok(/pinned<\/td><td>4\.00 req\/s<\/td>/.test(html), 'the legend\'s last value: 4 decisions a second');
    assert.ok(height > 1000 && height < 4000, `${height}`);
  });
});
