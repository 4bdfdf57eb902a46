import assert from 'node:assert/strict';
import { test } from 'node:test';
import { checkGoals, checkReferences, goalLine, referenceLine } from '../../bench/voice/goals.js';
import type { StrategySummary } from '../../bench/voice/summary.js';
import { syntheticResult } from './fixtures.js';

function tweak(s: StrategySummary, p: Partial<StrategySummary>): StrategySummary {
  return { ...s, ...p };
}

test('goals on a synthetic run: each verdict follows its threshold', () => {
  const r = syntheticResult();
  const [rr, wr] = r.summaries;
  const byName = (gs: ReturnType<typeof checkGoals>, part: string) => gs.find((g) => g.name.includes(part))!;

  // Hit rate vs ideal: exactly at 95% is met, just below is not.
  const at = checkGoals([rr, tweak(wr, { hitRate: 0.95 * 0.8, idealHitRate: 0.8 })]);
  assert.equal(byName(at, 'of ideal').met, true);
  const below = checkGoals([rr, tweak(wr, { hitRate: 0.949 * 0.8, idealHitRate: 0.8 })]);
  assert.equal(byName(below, 'of ideal').met, false);

  // p90 ratio: 5× met, 4.9× not.
  const p90 = (rrP90: number, wrP90: number) => checkGoals([tweak(rr, { ttft: { ...rr.ttft, p90: rrP90 } }), tweak(wr, { ttft: { ...wr.ttft, p90: wrP90 } })]);
  assert.equal(byName(p90(500, 100), 'p90').met, true);
  assert.equal(byName(p90(490, 100), 'p90').met, false);

  // Load: 1.25 met, 1.26 not.
  assert.equal(byName(checkGoals([rr, tweak(wr, { load: { ...wr.load, maxOverAvg: 1.25 } })]), 'load').met, true);
  assert.equal(byName(checkGoals([rr, tweak(wr, { load: { ...wr.load, maxOverAvg: 1.26 } })]), 'load').met, false);

  // Keyless vs keyed, on hit rate as a share of each subset's ideal, and on p50 TTFT.
  const keys = (keylessHit: number, keylessP50: number) => checkGoals([rr, tweak(wr, {
    keyed: { ...wr.keyed, hitRate: 0.8, idealHitRate: 0.8, ttft: { ...wr.keyed.ttft, p50: 100 } },
    keyless: { ...wr.keyless, hitRate: keylessHit, idealHitRate: 0.8, ttft: { ...wr.keyless.ttft, p50: keylessP50 } },
  })]);
  assert.equal(byName(keys(0.77, 105), '(hit rate)').met, true);
  assert.equal(byName(keys(0.75, 105), '(hit rate)').met, false);
  assert.equal(byName(keys(0.8, 105), 'TTFT p50').met, true);
  assert.equal(byName(keys(0.8, 106), 'TTFT p50').met, false);
});

test('a goal whose strategy was not run is listed as not measured, never dropped', () => {
  const r = syntheticResult();
  const onlyRr = checkGoals([r.summaries[0]]);
  assert.equal(onlyRr.length, 5);
  assert.ok(onlyRr.every((g) => g.met === null));
  assert.match(goalLine(onlyRr[1]), /^not measured .*needs affinity and round-robin/);
  const full = checkGoals(r.summaries);
  assert.equal(full.length, 5);
  assert.match(goalLine({ ...full[0], met: false }), /^NOT met/);
});

test('the synthetic run itself: warmroute wins on p90 and hit rate', () => {
  const r = syntheticResult();
  const [rr, wr] = r.summaries;
  assert.ok(wr.ttft.p90 < rr.ttft.p90);
  assert.ok((wr.hitRate ?? 0) > (rr.hitRate ?? 1));
  assert.equal(rr.overBudget, 12);
  assert.equal(wr.overBudget, 4); // the first turns only
  assert.deepEqual(wr.perTurn.map((t) => t.n), [4, 4, 4]);
  assert.equal(wr.keyless.sessions, 1);
  assert.equal(wr.keyed.sessions, 3);
});

test('the p90 goal carries the best achievable ratio (round-robin p90 / oracle p90); a reference line compares warmroute with the oracle', () => {
  const r = syntheticResult({ oracle: true });
  const [rr, wr, oracle] = r.summaries;
  assert.equal(oracle.strategy, 'oracle');
  const at = (rrP90: number, wrP90: number, oracleP90: number) => {
    const ss = [tweak(rr, { ttft: { ...rr.ttft, p90: rrP90 } }), tweak(wr, { ttft: { ...wr.ttft, p90: wrP90 } }), tweak(oracle, { ttft: { ...oracle.ttft, p90: oracleP90 } })];
    return { goals: checkGoals(ss), refs: checkReferences(ss) };
  };
  const { goals, refs } = at(690, 300, 300);
  // The goal itself is unchanged: 690 / 300 = 2.3× is not met, whatever the oracle did.
  assert.equal(goals.length, 5);
  const p90 = goals[1];
  assert.equal(p90.met, false);
  assert.equal(p90.measured, '690 ms vs 300 ms = 2.30×; best achievable in this run (oracle placement): 2.30×');
  assert.match(goalLine(p90), /^NOT met +warmroute TTFT p90 ≥ 5× better than round-robin: 690 ms vs 300 ms = 2\.30×; best achievable in this run \(oracle placement\): 2\.30×$/);
  assert.equal(refs.length, 1);
  assert.equal(refs[0].measured, "300 ms vs 300 ms = 1.00× the oracle's p90");
  assert.match(referenceLine(refs[0]), /^reference +warmroute TTFT p90 vs the oracle placement: 300 ms vs 300 ms = 1\.00×/);

  // A router that falls short of what the oracle reached reads differently from a workload where nobody could.
  const short = at(1000, 400, 150);
  assert.match(short.goals[1].measured, /= 2\.50×; best achievable in this run \(oracle placement\): 6\.67×$/);
  assert.match(short.refs[0].measured, /400 ms vs 150 ms = 2\.67× the oracle's p90/);
});

test('without the oracle the best achievable ratio and the reference say not measured, and the goals are unchanged', () => {
  const r = syntheticResult();
  const goals = checkGoals(r.summaries);
  assert.match(goals[1].measured, /^\d+ ms vs \d+ ms = [\d.]+×; best achievable in this run \(oracle placement\): not measured \(needs round-robin and oracle\)$/);
  assert.deepEqual(goals.map((g) => g.met), checkGoals(syntheticResult({ oracle: true }).summaries.slice(0, 2)).map((g) => g.met));
  assert.match(referenceLine(checkReferences(r.summaries)[0]), /^reference +.*not measured \(needs affinity and oracle\)$/);
  // The oracle alone measures nothing against round-robin either.
  const onlyOracle = checkGoals([syntheticResult({ oracle: true }).summaries[2]]);
  assert.match(onlyOracle[1].measured, /needs affinity and round-robin\); best achievable .*needs round-robin and oracle\)$/);
});
