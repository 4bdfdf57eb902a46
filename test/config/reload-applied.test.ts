import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { resolveConfig } from '../../src/config/load.js';
import { startFixture } from '../helpers/fixture-upstream.js';
import { startGateway } from '../helpers/gateway.js';

describe('a reload applies what can change and keeps what is fixed at start', () => {
  it('names every fixed setting it keeps, applies the rest, and shuts down with the reloaded drain time', async () => {
    const a = await startFixture('a');
    const g = await startGateway([a.url]);
    try {
      g.gw.reconfigure(resolveConfig({
        upstreams: [{ url: a.url }],
        responses: { onLostState: 'forward' },
        routing: { options: { trafficHalfLifeMs: 1_000, prefixTtlMs: 1_000, loadFactor: 1.5 } },
        timeouts: { drainMs: 1_234 },
      }));
      const warned = g.logs.find((l) => l.msg?.startsWith('config reload: these settings apply only at start'));
      assert.ok(warned, 'the fixed settings are named');
      for (const key of ['responses', 'routing.options.trafficHalfLifeMs', 'routing.options.prefixTtlMs']) assert.ok(warned.keys.includes(key), key);
      assert.ok(!warned.keys.includes('routing.options.loadFactor'), 'a setting that applies is not named');
    } finally {
      await g.close();
      await a.close();
    }
    const draining = g.logs.find((l) => l.msg?.startsWith('draining'));
    assert.equal(draining?.drainMs, 1_234, 'close() drains for the reloaded timeouts.drainMs');
  });
});
