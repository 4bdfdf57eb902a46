import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Counter, Histogram, Registry } from 'prom-client';
import { fastCounter, fastHistogram } from '../../src/telemetry/fast-metrics.js';

const BUCKETS = [0.00005, 0.0001, 0.001, 0.01, 0.5, 1, 60];
const VALUES = [0, 0.00004, 0.00005, 0.00007, 0.0009, 0.2, 0.7, 59, 61, 1e-9, 0.0001];

describe('fast metrics', () => {
  it('a histogram exposes the same text as prom-client for the same observations', async () => {
    const ours = new Registry();
    const theirs = new Registry();
    const a = fastHistogram({ name: 'h_seconds', help: 'help text', labelNames: ['hop'], buckets: BUCKETS, registers: [ours] });
    const b = new Histogram({ name: 'h_seconds', help: 'help text', labelNames: ['hop'], buckets: BUCKETS, registers: [theirs] });
    const u = fastHistogram({ name: 'u_seconds', help: 'unlabelled', buckets: BUCKETS, registers: [ours] });
    const v = new Histogram({ name: 'u_seconds', help: 'unlabelled', buckets: BUCKETS, registers: [theirs] });
    assert.equal(await ours.metrics(), await theirs.metrics(), 'empty');
    for (const [i, x] of VALUES.entries()) {
      const hop = i % 3 === 0 ? 'parse' : 'route';
      a.labels(hop).observe(x);
      b.labels(hop).observe(x);
      u.observe(x);
      v.observe(x);
    }
    assert.equal(await ours.metrics(), await theirs.metrics());
    ours.resetMetrics();
    theirs.resetMetrics();
    u.observe(0.3);
    v.observe(0.3);
    // prom-client drops reset series entirely; ours keeps them at zero: compare the unlabelled one only.
    assert.match(await ours.metrics(), /u_seconds_bucket\{le="0.5"\} 1\n/);
    assert.match(await ours.metrics(), /u_seconds_count 1/);
  });

  it('a counter exposes the same text as prom-client, zero-initialised series included', async () => {
    const ours = new Registry();
    const theirs = new Registry();
    const a = fastCounter({ name: 'c_total', help: 'requests', labelNames: ['replica', 'code'], registers: [ours] });
    const b = new Counter({ name: 'c_total', help: 'requests', labelNames: ['replica', 'code'], registers: [theirs] });
    a.inc({ replica: 'r0', code: '2xx' }, 0);
    b.inc({ replica: 'r0', code: '2xx' }, 0);
    for (let i = 0; i < 5; i++) {
      a.labels('r1', '2xx').inc();
      b.labels('r1', '2xx').inc();
    }
    a.inc({ replica: 'r2', code: '5xx' }, 2.5);
    b.inc({ replica: 'r2', code: '5xx' }, 2.5);
    assert.equal(await ours.metrics(), await theirs.metrics());
    assert.throws(() => a.labels('r1', '2xx').inc(-1));
    assert.throws(() => a.labels('only-one'));
  });
});
