// The simulator's KV cache held to vLLM 0.32's: the block pool's free queue and null block
// (v1/core/block_pool.py), the scheduler's admission of a whole prompt (scheduler_reserve_full_isl),
// and recorded runs of the real CPU fleet replayed request by request (bench/calibrate).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createVirtualClock } from '../../bench/scale/des/clock.js';
import { resolveConfig } from '../../bench/sim/config.js';
import { createEngine } from '../../bench/sim/engine.js';
import { createBlockPool, type KvModel } from '../../bench/sim/kv-cache.js';
import { createSeq, NO_SALT_ROOT, type Seq } from '../../bench/sim/sequence.js';

test('one of num_gpu_blocks is the null block: it never holds KV', () => {
  assert.equal(createBlockPool(48, null, 128).total, 47);
  assert.equal(createBlockPool(48, null, 128).freeCount(), 47);
  assert.equal(createBlockPool(48, null, 128, 'naive').total, 48);
});

test('a freed block with no hash is reused before a cached block is evicted', () => {
  const run = (model: KvModel) => {
    const pool = createBlockPool(model === 'vllm' ? 5 : 4, null, 16, model); // 4 usable either way
    const a = pool.allocate(2);
    a.forEach((id, i) => pool.cache(id, 100 + i));
    const b = pool.allocate(2); // never full: no hash
    pool.release(a);
    pool.release(b);
    pool.allocate(2);
    return pool.lookup((i) => 100 + i, 2).length;
  };
  assert.equal(run('vllm'), 2, "A's cached blocks survive: B's partial blocks were at the front of the free queue");
  assert.equal(run('naive'), 0, 'appended behind A, B\'s blocks left A\'s to be evicted');
});

test('a waiting request is admitted only when blocks for its whole prompt are free', () => {
  const run = (model: KvModel) => {
    const clock = createVirtualClock();
    // 10 usable blocks of 16 tokens; prefill chunks of at most 32 tokens.
    const cfg = resolveConfig({ blockSize: 16, kvBlocks: 11, maxModelLen: 160, maxNumBatchedTokens: 32, kvModel: model, frontendMs: 0, tokenizeMsPerToken: 0 });
    const pool = createBlockPool(cfg.kvBlocks, null, cfg.blockSize, cfg.kvModel);
    const admitted: Record<string, number> = {};
    const finished: Record<string, number> = {};
    let preemptions = 0;
    const engine = createEngine(cfg, pool, {
      onAdmit(seq, _q, _h, first) { if (first) admitted[seq.id] = clock.now(); },
      onFirstToken() {}, onToken() {},
      onFinish(seq) { finished[seq.id] = clock.now(); },
      onPreempt() { preemptions++; },
    }, clock);
    const seq = (id: string, first: number): Seq => {
      const prompt = Array.from({ length: 96 }, (_, i) => first + i);
      const ids = [1, 2, 3, 4];
      return createSeq({ id, prompt, root: NO_SALT_ROOT, plan: { ids, deltas: ids.map(() => ({ t: 'none' as const })), finish: 'stop' }, maxOut: 4, httpArrivalMs: 0, sink: { onToken() {}, onFinish() {} } });
    };
    engine.submit(seq('a', 1000)); // 6 blocks for its prompt, 7 with its answer
    clock.setTimeout(() => engine.submit(seq('b', 2000)), 1); // 6 more: not while A holds its 6
    clock.run(Number.POSITIVE_INFINITY);
    return { bAfterA: admitted.b >= finished.a, preemptions, done: Object.keys(finished).length };
  };
  const vllm = run('vllm');
  assert.equal(vllm.done, 2);
  assert.equal(vllm.bAfterA, true, 'B waited for A to finish');
  assert.equal(vllm.preemptions, 0);
  const naive = run('naive');
  assert.equal(naive.done, 2);
  assert.ok(!naive.bAfterA || naive.preemptions > 0, 'by its first chunk alone, B would have been admitted beside A');
});
