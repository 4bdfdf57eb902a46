/**
 * bench:voice's shared-fleet runs: the three runs happen on a real (simulated) fleet through real
 * gateways, batch jobs only where there is batch, the class reaching vLLM only with priority on;
 * and the goal's verdict is the arithmetic.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { runShared, SHARED_DEFAULTS, SHARED_MODES, sharedTable, sharedVerdict, type SharedRun } from '../../bench/voice/shared.js';

const run = (mode: SharedRun['mode'], p90: number, batchPerS: number): SharedRun => ({
  mode, batchPrefill: 0, voice: { n: 10, p50: p90 / 2, p90, p99: p90 }, voiceErrors: 0, turnsOverBudget: 0, turns: 10,
  batchJobs: 0, batchErrors: 0, batchPerS, durationS: 1, configMismatch: [],
});

describe('bench:voice shared fleet', () => {
  it('the verdict: voice p90 within 1.2× of no batch, batch at ≥ 80% of its rate with priority off', () => {
    assert.equal(sharedVerdict([run('no batch', 100, 0), run('batch, priority off', 500, 2), run('batch, priority on', 120, 1.6)]).met, true);
    assert.equal(sharedVerdict([run('no batch', 100, 0), run('batch, priority off', 500, 2), run('batch, priority on', 121, 1.6)]).met, false);
    assert.equal(sharedVerdict([run('no batch', 100, 0), run('batch, priority off', 500, 2), run('batch, priority on', 100, 1.5)]).met, false);
  });

  it('runs the three modes end to end on a small workload', { timeout: 180_000 }, async () => {
    const o = { ...SHARED_DEFAULTS, sessions: 2, turns: 2, batchShare: 0.5, batchPromptTokens: [200, 300] as [number, number], batchOutputTokens: [5, 10] as [number, number], systemTokens: [200, 300] as [number, number], thinkMs: [0, 10] as [number, number], maxDurationS: 60 };
    const runs = await runShared(o);
    assert.deepEqual(runs.map((r) => r.mode), [...SHARED_MODES]);
    for (const r of runs) assert.equal(r.voice.n, 4, `${r.mode}: every voice turn answered`);
    assert.equal(runs[0].batchJobs, 0);
    assert.ok(runs[1].batchJobs > 0 && runs[2].batchJobs > 0, 'batch jobs completed beside the voice turns');
    assert.match(sharedTable(runs, o), /Fleet configuration audit: every replica configured alike/);
  });
});
