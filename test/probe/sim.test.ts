// The probe against one simulated vLLM replica (prefix caching on, calibrated H100 timings): the
// repeat9k pair must show what the field report saw self-hosted — the second, byte-identical send
// hits the cache and is far faster than the first.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { startReplica } from '../../bench/sim/index.js';
import { runProbe } from '../../src/probe/run.js';

test('against a simulated replica: repeat9k 2nd send hits the prefix cache and is much faster', async () => {
  const replica = await startReplica({ outputTokens: { min: 4, max: 8 } });
  try {
    const r = await runProbe({
      baseUrl: `${replica.url}/v1`,
      model: replica.config.model,
      trials: 2,
      cases: ['tiny', 'repeat9k'],
      // ~4.5K tokens keeps the cold prefill near half a second of simulated compute.
      scale: 0.5,
    });
    assert.ok(r.ok, JSON.stringify(r.rows.map((x) => x.results[0].samples.map((s) => s.error))));
    assert.equal(r.endpoints[0].connections, 1);
    const [, first, second] = r.rows;
    assert.deepEqual([first.send, second.send], ['first', 'second']);
    const cold = first.results[0];
    const warm = second.results[0];
    assert.ok(
      warm.ttftMs!.median * 3 < cold.ttftMs!.median,
      `warm ${warm.ttftMs!.median.toFixed(1)} ms vs cold ${cold.ttftMs!.median.toFixed(1)} ms`,
    );
    assert.ok(cold.promptTokens! > 4000, `prompt tokens ${cold.promptTokens}`);
    assert.ok((cold.cachedTokens ?? 0) < 100, `cold send cached ${cold.cachedTokens}`);
    assert.ok(warm.cachedTokens! > 0.9 * warm.promptTokens!, `warm send cached ${warm.cachedTokens} of ${warm.promptTokens}`);
  } finally {
    await replica.close();
  }
});

test('through the gateway, keyless: the repeated prompt follows its prefix to the warm replica', async () => {
  const { startFleet } = await import('../../bench/sim/index.js');
  const { startGateway } = await import('../helpers/gateway.js');
  const fleet = await startFleet({ replicas: 2, outputTokens: { min: 4, max: 8 } });
  const g = await startGateway(fleet.urls);
  try {
    const r = await runProbe({
      baseUrl: fleet.urls[0],
      compareUrl: g.url,
      model: fleet.replicas[0].config.model,
      trials: 2,
      cases: ['tiny', 'repeat9k'],
      scale: 0.5,
    });
    assert.ok(r.ok);
    const [, first, second] = r.rows;
    const viaCold = first.results[1];
    const viaWarm = second.results[1];
    // No session key: only the prefix chain can send the second send where the first one went.
    assert.ok(viaWarm.cachedTokens! > 0.9 * viaWarm.promptTokens!, `warm send through the gateway cached ${viaWarm.cachedTokens} of ${viaWarm.promptTokens}`);
    assert.ok(viaWarm.ttftMs!.median * 3 < viaCold.ttftMs!.median);
    const routes = accessRoutes(g.logs);
    assert.ok(routes.includes('prefix'), `routes seen: ${routes}`);
  } finally {
    await g.close();
    await fleet.close();
  }
});

function accessRoutes(logs: Record<string, any>[]): string[] {
  return logs.filter((l) => l.msg === 'request' && l.path === '/v1/chat/completions').map((l) => l.route);
}
