import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import { Writable } from 'node:stream';
import { createOutlierDetector } from '../../src/fleet/outlier.js';
import { createRegistry } from '../../src/fleet/registry.js';
import { createMetrics } from '../../src/telemetry/metrics.js';
import { counterSum } from '../store/redis-server.js';

describe('outlier detection past maxEjectionPercent', () => {
  it('counts every skipped ejection but warns once per interval, with how many it did not log', async () => {
    const lines: Record<string, unknown>[] = [];
    const log = pino({ level: 'info' }, new Writable({ write(c, _e, cb) { lines.push(JSON.parse(String(c))); cb(); } }));
    const registry = createRegistry([{ name: 'r0', url: 'http://127.0.0.1:1', weight: 1 }, { name: 'r1', url: 'http://127.0.0.1:2', weight: 1 }]);
    const metrics = createMetrics({ defaultMetrics: false });
    const outlier = createOutlierDetector({
      registry, metrics, log,
      options: () => ({ consecutiveErrors: 1, consecutiveConnectFailures: 1, baseEjectionMs: 60_000, maxEjectionMs: 60_000, forgetAfterMs: 60_000, maxEjectionPercent: 50 }),
      changed: () => {},
    });
    try {
      const [r0, r1] = registry.replicas;
      outlier.observe(r0, '5xx');
      assert.ok(r0.ejectedUntil > Date.now(), 'one of two may be ejected');
      for (let i = 0; i < 100; i++) outlier.observe(r1, '5xx');
      assert.equal(r1.ejectedUntil, 0, 'not both');
      assert.equal(await counterSum(metrics.ejectionsSkipped), 100);
      assert.equal(lines.filter((l) => String(l.msg).startsWith('outlier not ejected')).length, 1);
    } finally {
      outlier.stop();
    }
  });
});
