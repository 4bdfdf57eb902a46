import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FLEET_BENCH, report, runFleetBench, simFleet, vllmLora } from '../../bench/adapters/fleet.js';
import { loraServeOptions } from '../../bench/real/fleet-vllm.js';

describe('bench:adapters --fleet', () => {
  it('on the real fleet: two replicas started with --max-loras 2, the four adapters of the run at start, the rest loadable at run time', () => {
    const lora = vllmLora();
    assert.equal(Object.keys(lora.adapters).length, FLEET_BENCH.rotation);
    assert.deepEqual(lora.preloaded, ['lora-0', 'lora-1', 'lora-2', 'lora-3']);
    const serve = loraServeOptions(lora);
    const args = serve.extraArgs!.join(' ');
    assert.match(args, /--enable-lora --max-loras 2 --max-lora-rank 8 --max-cpu-loras 12 --lora-modules lora-0=\S+ lora-1=\S+ lora-2=\S+ lora-3=\S+$/);
    assert.equal(serve.extraEnv!.VLLM_ALLOW_RUNTIME_LORA_UPDATING, '1');
  });

  it('runs end to end on simulated replicas: every strategy’s warm turns, and on demand one load for a first request, 0 errors over a rotation of 12 adapters', async () => {
    const f = await simFleet();
    try {
      const r = await runFleetBench(f, { sessionsPerAgent: 1, turns: 2, maxTokens: 4, systemTokens: [100, 150], seed: 1 }, ['affinity', 'one-adapter'], true);
      assert.deepEqual(r.rows.map((x) => x.strategy), ['affinity', 'one-adapter']);
      for (const row of r.rows) {
        assert.equal(row.errors, 0, JSON.stringify(row));
        assert.equal(row.warm.n, FLEET_BENCH.adapters * FLEET_BENCH.agentsPerAdapter);
        assert.ok(Number.isFinite(row.p90Ratio));
      }
      // Sent as one adapter, the sessions use one slot on each replica.
      assert.deepEqual(Object.values(r.rows[1].adaptersPerReplica).map((a) => a.length), [1, 1]);
      const d = r.onDemand!;
      assert.ok(d.first.ok);
      assert.equal(d.first.loads, 1);
      assert.ok(d.first.loadMs > 0);
      assert.equal(d.concurrent.errors, 0);
      assert.ok(d.concurrent.loads >= 1 && d.concurrent.loads <= FLEET_BENCH.replicas, `${d.concurrent.loads} loads`);
      assert.equal(d.rotation.errors, 0, d.rotation.errorsSeen.join('; '));
      assert.ok(d.rotation.maxLoadedPerReplica <= FLEET_BENCH.maxLoadedPerReplica);
      assert.match(report(r), /warmroute/);
    } finally {
      await f.stop();
    }
  });
});
