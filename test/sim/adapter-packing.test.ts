import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ADAPTER_SIM_DEFAULTS, runAdapterSim } from '../../bench/adapters/sim-run.js';

// bench:adapters' fleet (8 replicas × 32 adapters of Zipf popularity, 4 LoRA slots each, 192 voice
// sessions), one seed, in virtual time: deterministic, a few seconds.
describe('a fleet of many adapters in the simulator', () => {
  it('warmroute packs adapters into the slots: TTFT p90 within 1.2× the adapter-grouping oracle’s, hits ≥ 95% of ideal, no replica past 1.3× the mean', () => {
    const [warm, oracle] = runAdapterSim(ADAPTER_SIM_DEFAULTS, 1, ['affinity', 'oracle']);
    assert.equal(warm.errors, 0);
    assert.ok(!warm.truncated);
    assert.ok(warm.p90 <= 1.2 * oracle.p90, `p90 ${warm.p90.toFixed(0)} ms against the oracle's ${oracle.p90.toFixed(0)} ms`);
    assert.ok(warm.hit >= 0.95 * warm.ideal, `hits ${(warm.hit * 100).toFixed(1)}% of ${(warm.ideal * 100).toFixed(1)}%`);
    assert.ok(warm.maxOverMean <= 1.3, `busiest replica ${warm.maxOverMean.toFixed(2)}× the mean`);
    // Slots, not load alone: most replicas serve no more adapters than they have slots.
    const over = warm.adaptersPerReplica.filter((n) => n > ADAPTER_SIM_DEFAULTS.maxLoras).length;
    assert.ok(over <= 2, `adapters per replica ${warm.adaptersPerReplica.join(' ')}`);
  });

  it('the busiest replica within 1.5× the mean on seeds 1–6; the oracle’s balance comes from knowing the run’s counts: its plan from the adapters’ popularity alone leaves one past 1.3×', () => {
    for (let seed = 1; seed <= 6; seed++) {
      const [warm] = runAdapterSim(ADAPTER_SIM_DEFAULTS, seed, ['affinity']);
      assert.ok(warm.maxOverMean <= 1.5, `seed ${seed}: busiest replica ${warm.maxOverMean.toFixed(2)}× the mean`);
    }
    const [oracle, popularity] = runAdapterSim(ADAPTER_SIM_DEFAULTS, 3, ['oracle', 'popularity-oracle']);
    assert.ok(oracle.maxOverMean <= 1.3, `the oracle ${oracle.maxOverMean.toFixed(2)}× the mean`);
    assert.ok(popularity.maxOverMean > 1.3, `its plan from popularity ${popularity.maxOverMean.toFixed(2)}× the mean`);
    assert.equal(popularity.errors, 0);
  });

  it('four gateway pods on one store place as one: each pod counts every pod’s adapter requests (the activity channel), p90 within 1.2× the oracle’s', () => {
    const [warm, oracle] = runAdapterSim({ ...ADAPTER_SIM_DEFAULTS, pods: 4 }, 1, ['affinity', 'oracle']);
    assert.equal(warm.errors, 0);
    // Each pod with its own requests alone mixes adapters on every replica: p90 14–51× the oracle's.
    assert.ok(warm.p90 <= 1.2 * oracle.p90, `p90 ${warm.p90.toFixed(0)} ms against the oracle's ${oracle.p90.toFixed(0)} ms`);
    assert.ok(warm.hit >= 0.95 * warm.ideal, `hits ${(warm.hit * 100).toFixed(1)}% of ${(warm.ideal * 100).toFixed(1)}%`);
    const over = warm.adaptersPerReplica.filter((n) => n > ADAPTER_SIM_DEFAULTS.maxLoras).length;
    assert.ok(over <= 3, `adapters per replica ${warm.adaptersPerReplica.join(' ')}`);
  });
});
