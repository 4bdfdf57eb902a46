// warmroute's router in virtual time on the simulator held to vLLM (des-replay.ts), against a model
// of SGLang's cache_aware policy on the same orders of the witness's workloads. Deterministic: the
// same seeds give the same figures, so these pin placement decisions, not timings.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { desReplay } from '../../bench/calibrate/des-replay.js';
import { CPU_TINY_TIMING } from '../../bench/calibrate/engine-replay.js';
import { createSglangModel } from '../../bench/calibrate/sglang-model.js';
import { versus } from '../../bench/calibrate/versus.js';
import { MULTI_TURN, syntheticMultiTurnTrace, syntheticSharedTrace, WORKLOADS, type SharedPrefixWorkload } from '../../bench/calibrate/workloads.js';

const ENGINE = { blockSize: 128, kvBlocks: 48, maxNumBatchedTokens: 2048, maxNumSeqs: 128 };
const SEEDS = [1, 2, 3, 4, 5, 6];

describe('the SGLang cache_aware model', () => {
  it('sends a prompt to the worker whose tree matches more than 30% of it, else to the smallest tree', () => {
    const m = createSglangModel(2);
    const a = Array.from({ length: 100 }, (_, i) => i);
    const b = Array.from({ length: 100 }, (_, i) => 1000 + i);
    assert.equal(m.route(a), 0);
    assert.equal(m.route(b), 1, 'nothing matches: the smallest tree (worker 1 is empty)');
    assert.equal(m.route([...a.slice(0, 40), 5000, 5001]), 0, '40 of 42 tokens match worker 0');
    // 20 of 100 tokens match worker 1: under the threshold, so the smallest tree takes it, and that
    // is worker 1's (100 tokens against worker 0's 102).
    assert.equal(m.route([...b.slice(0, 20), ...Array.from({ length: 80 }, (_, i) => 9000 + i)]), 1);
    assert.equal(m.route([...a.slice(0, 20), ...Array.from({ length: 80 }, (_, i) => 7000 + i)]), 0, 'worker 1 is now the larger tree');
  });
});

describe('warmroute against SGLang cache_aware on the calibrated simulator', () => {
  it('shared prompts that fit the fleet: every order at the SGLang model\'s hit rate or above', () => {
    const w = WORKLOADS.shared as SharedPrefixWorkload;
    const v = versus((seed) => syntheticSharedTrace(w, seed, ENGINE), SEEDS, { ideal: false });
    for (const s of v.seeds) assert.ok(s.warmroute >= s.sglang - 0.002, `seed ${s.seed}: ${(100 * s.warmroute).toFixed(1)}% against ${(100 * s.sglang).toFixed(1)}%`);
    assert.ok(v.mean.roundRobin < v.mean.warmroute - 0.2);
  });

  it('shared prompts that overflow the fleet: at the SGLang model\'s hit rate or above on average', () => {
    const w = WORKLOADS['shared-pressure'] as SharedPrefixWorkload;
    const v = versus((seed) => syntheticSharedTrace(w, seed, ENGINE), SEEDS, { ideal: false });
    assert.ok(v.mean.warmroute >= v.mean.sglang, `${(100 * v.mean.warmroute).toFixed(1)}% against ${(100 * v.mean.sglang).toFixed(1)}%`);
    assert.ok(v.mean.warmroute > 1.8 * v.mean.roundRobin);
  });

  it('shared prompts of Zipf popularity that overflow the fleet: the busiest stay warm, the quieter are the ones left cold', () => {
    const w = { ...(WORKLOADS['shared-pressure'] as SharedPrefixWorkload), zipf: 0.8 };
    const v = versus((seed) => syntheticSharedTrace(w, seed, ENGINE), SEEDS, { ideal: false });
    const [busiest, next, quieter] = v.byPopularity.warmroute as [number, number, number];
    const figures = `${(100 * busiest).toFixed(1)}% / ${(100 * next).toFixed(1)}% / ${(100 * quieter).toFixed(1)}%`;
    // Containment sends the prompts that come late (the quieter ones, under Zipf) to the replica
    // that overflows, and vLLM's LRU keeps what comes back soonest: spreading every prompt over
    // both replicas (round-robin) gets the busiest quarter ~50%.
    assert.ok(busiest > 0.72 && busiest > quieter + 0.3, figures);
    assert.ok(next > quieter, figures);
    assert.ok(v.mean.warmroute >= v.mean.sglang - 0.01, `${(100 * v.mean.warmroute).toFixed(1)}% against ${(100 * v.mean.sglang).toFixed(1)}%`);
  });

  it('multi-turn completions (no declared system prompt): a group\'s sessions join the replica its prompt is warm on', () => {
    const v = versus((seed) => syntheticMultiTurnTrace(MULTI_TURN, seed, ENGINE), SEEDS, { ideal: false });
    // Placing each session by load alone, as before the warm prefix stood for the agent, got
    // round-robin's ~10%: every group on both replicas.
    assert.ok(v.mean.warmroute > 1.8 * v.mean.roundRobin, `${(100 * v.mean.warmroute).toFixed(1)}% against round-robin's ${(100 * v.mean.roundRobin).toFixed(1)}%`);
    assert.ok(v.mean.warmroute >= v.mean.sglang - 0.015, `${(100 * v.mean.warmroute).toFixed(1)}% against ${(100 * v.mean.sglang).toFixed(1)}%`);
    const t = syntheticMultiTurnTrace(MULTI_TURN, 1, ENGINE);
    const r = desReplay(t, { strategy: 'affinity', timing: CPU_TINY_TIMING, kvModel: 'vllm', kvEvents: true });
    // Each group's sessions (the sessions whose prompts open with the same system prompt) placed on
    // one replica: where each session's first turn went.
    const where = new Map<number, Set<number>>();
    const placed = new Set<string>();
    t.requests.forEach((q, i) => {
      if (r.replicas[i] < 0 || placed.has(q.group)) return;
      placed.add(q.group);
      const g = q.promptIds[0];
      where.set(g, (where.get(g) ?? new Set()).add(r.replicas[i]));
    });
    const split = [...where.values()].filter((s) => s.size > 1).length;
    assert.ok(split <= 1, `${split} of ${where.size} groups on both replicas`);
  });
});
