/**
 * bench:voice's shared fleet in virtual time (bench/voice/shared-des.ts): deterministic for a seed,
 * and the mechanisms the frontier compares act as they should: priority on with the batch prefill
 * bound and chunked batch prefill keeps the callers' p90 near the no-batch run, priority off does not.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { runSharedDes, type DesSharedOptions } from '../../bench/voice/shared-des.js';
import { SHARED_DEFAULTS } from '../../bench/voice/shared.js';

const o: DesSharedOptions = {
  ...SHARED_DEFAULTS, turns: 6, longPrefill: 256, maxDurationS: 3600,
  gateway: { batchPrefill: 1, holdForInteractive: true, reservedShare: 0.25 }, replica: {}, gatewayMs: 1,
};

describe('bench:voice shared fleet in virtual time', () => {
  it('the same seed gives the same figures', async () => {
    const a = await runSharedDes('batch, priority on', o);
    const b = await runSharedDes('batch, priority on', o);
    assert.deepEqual(a, b);
    assert.equal(a.turns, o.sessions * o.turns);
  });

  it('priority on (K 1, chunks of 256) keeps the voice p90 within 2.5× of no batch; priority off is far past it', async () => {
    const none = await runSharedDes('no batch', o);
    const off = await runSharedDes('batch, priority off', o);
    const on = await runSharedDes('batch, priority on', o);
    assert.equal(none.batchJobs, 0);
    assert.ok(off.batchJobs > 0 && on.batchJobs > 0);
    assert.ok(on.voice.p90 < 2.5 * none.voice.p90, `on ${on.voice.p90} vs none ${none.voice.p90}`);
    assert.ok(off.voice.p90 > 10 * none.voice.p90, `off ${off.voice.p90} vs none ${none.voice.p90}`);
  });

  it('cutting and resending batch prefills for a caller brings the p90 down further, at a cost in batch', async () => {
    const on = await runSharedDes('batch, priority on', o);
    const cut = await runSharedDes('batch, priority on', { ...o, gateway: { ...o.gateway, preemptBatch: true } });
    assert.ok(cut.preemptions > 0);
    assert.ok(cut.voice.p90 < on.voice.p90, `cut ${cut.voice.p90} vs on ${on.voice.p90}`);
  });
});
