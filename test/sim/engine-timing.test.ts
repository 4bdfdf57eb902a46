/**
 * The engine in virtual time (no sockets): vLLM's async scheduling (--async-scheduling), where a
 * request that arrives during a step also waits for the step after it, and the roofline step
 * model, where a step's linear prefill work overlaps its fixed floor.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createVirtualClock } from '../../bench/scale/des/clock.js';
import { resolveConfig, type SimReplicaOptions } from '../../bench/sim/config.js';
import { createEngine } from '../../bench/sim/engine.js';
import { createBlockPool } from '../../bench/sim/kv-cache.js';
import { createSeq, NO_SALT_ROOT } from '../../bench/sim/sequence.js';
import { stepMs } from '../../bench/sim/timing.js';

/** Virtual ms to the first token of a short request sent `atMs` after a long prefill started. */
function ttftBeside(opts: SimReplicaOptions, atMs: number): { ttft: number; step: number } {
  const cfg = resolveConfig({ outputTokens: { min: 5, max: 5 }, ...opts });
  const clock = createVirtualClock();
  const engine = createEngine(cfg, createBlockPool(cfg.kvBlocks, null, cfg.blockSize, cfg.kvModel), { onAdmit() {}, onFirstToken() {}, onToken() {}, onFinish() {}, onPreempt() {} }, clock);
  const firsts = new Map<string, number>();
  const seq = (id: string, tokens: number) => createSeq({
    id, prompt: Array.from({ length: tokens }, (_, i) => (i * 7919 + id.length * 31) % 30_000 + 10), root: NO_SALT_ROOT,
    plan: { ids: [1, 2, 3, 4, 5], deltas: [], finish: 'stop' }, maxOut: 5, httpArrivalMs: clock.now(),
    sink: { onToken(s, i) { if (i === 0) firsts.set(s.id, clock.now()); }, onFinish() {} },
  });
  engine.submit(seq('long', 4000), 0);
  clock.setTimeout(() => engine.submit(seq('short', 50), atMs), atMs);
  clock.run(60_000);
  const step = stepMs(cfg, [{ n: 4000, ctx: 0, decode: false }]);
  return { ttft: firsts.get('short')! - atMs, step };
}

describe('sim engine: async scheduling and the roofline step', () => {
  it('without async scheduling, a request arriving mid-step joins the next one; with it, the one after', () => {
    const sync = ttftBeside({}, 10);
    const asyncRun = ttftBeside({ asyncScheduling: true }, 10);
    // Sync: the rest of the 4,000-token step, then a step with its prefill and the long one's first decode.
    assert.ok(sync.ttft > sync.step - 10 && sync.ttft < sync.step + 60, `sync ${sync.ttft} vs step ${sync.step}`);
    // Async: that step was scheduled when the long prefill started, so the short one waits a step more.
    assert.ok(asyncRun.ttft > sync.ttft + 15, `async ${asyncRun.ttft} vs sync ${sync.ttft}`);
  });

  it('an idle engine schedules an arrival at once, async or not', () => {
    assert.equal(ttftBeside({ asyncScheduling: true }, 5_000).ttft, ttftBeside({}, 5_000).ttft);
  });

  it('roofline: a small chunk costs the floor, a long prefill its linear work; additive: floor plus work', () => {
    const k = resolveConfig({});
    const r = resolveConfig({ roofline: true });
    const small = [{ n: 128, ctx: 0, decode: false }];
    assert.equal(stepMs(r, small), k.stepBaseMs + k.attnMsPerTokenPair * 128 * 128);
    assert.equal(stepMs(k, small), k.stepBaseMs + k.prefillMsPerToken * 128 + k.attnMsPerTokenPair * 128 * 128);
    const long = [{ n: 4000, ctx: 0, decode: false }];
    assert.equal(stepMs(r, long), k.prefillMsPerToken * 4000 + k.attnMsPerTokenPair * 4000 * 4000);
  });
});
