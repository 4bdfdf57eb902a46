import assert from 'node:assert/strict';
import { test } from 'node:test';
import { checkGoals, checkReferences, goalLine, MIN_TURNS_FOR_P50, referenceLine } from '../../bench/voice/goals.js';
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

  // p90 against the oracle placement of the same run: 1.1× met, just above not.
  const withOracle = syntheticResult({ oracle: true }).summaries;
  const p90 = (wrP90: number, oracleP90: number) => checkGoals([withOracle[0], tweak(withOracle[1], { ttft: { ...withOracle[1].ttft, p90: wrP90 } }), tweak(withOracle[2], { ttft: { ...withOracle[2].ttft, p90: oracleP90 } })]);
  assert.equal(byName(p90(110, 100), 'p90').met, true);
  assert.equal(byName(p90(111, 100), 'p90').met, false);
  assert.equal(byName(p90(90, 100), 'p90').met, true);

  // Beating the oracle where it splits agents: judged only when the split costs it hits.
  const beat = (oracleHit: number, wrP90: number) => byName(checkGoals([withOracle[0], tweak(withOracle[1], { ttft: { ...withOracle[1].ttft, p90: wrP90 } }),
    tweak(withOracle[2], { hitRate: oracleHit, idealHitRate: 0.99, ttft: { ...withOracle[2].ttft, p90: 100 } })], { oracleMixesAgents: true }), 'below the oracle');
  assert.equal(beat(0.95, 90).met, true);
  assert.equal(beat(0.95, 100).met, false);
  assert.equal(beat(0.985, 90).met, null);
  assert.match(beat(0.985, 90).measured, /mix fits its caches/);
  assert.equal(checkGoals(withOracle).some((g) => g.name.includes('below the oracle')), false);

  // Load, per session: 48 sessions on 4 replicas may put ⌈1.25 × 12⌉ = 15 on one, not 16;
  // 50 may put ⌈15.6⌉ = 16 (1.28× the average: the integer bound, not noise). Requests served
  // are shown, not judged: at 1.30× with 15 sessions the verdict stands.
  const sessions = (busiest: number, total: number, maxOverAvg = 1.3) => {
    const rest = total - busiest;
    const counts = { a: busiest, b: Math.ceil(rest / 3), c: Math.floor(rest / 3), d: rest - Math.ceil(rest / 3) - Math.floor(rest / 3) };
    return checkGoals([rr, tweak(wr, { load: { ...wr.load, maxOverAvg, sessions: counts, sessionsMaxOverAvg: busiest / (total / 4) } })]);
  };
  assert.equal(byName(sessions(15, 48), 'load').met, true);
  assert.equal(byName(sessions(16, 48), 'load').met, false);
  assert.equal(byName(sessions(16, 50), 'load').met, true);
  assert.equal(byName(sessions(17, 50), 'load').met, false);
  assert.match(byName(sessions(15, 48), 'load').measured, /15 of 48 sessions .*bound 15.*requests served 1\.30×/);

  // Keyless vs keyed, on hit rate as a share of each subset's ideal, and on p50 TTFT.
  const keys = (keylessHit: number, keylessP50: number, keylessTurns = MIN_TURNS_FOR_P50) => checkGoals([rr, tweak(wr, {
    keyed: { ...wr.keyed, hitRate: 0.8, idealHitRate: 0.8, ttft: { ...wr.keyed.ttft, p50: 100, n: 3 * MIN_TURNS_FOR_P50 } },
    keyless: { ...wr.keyless, hitRate: keylessHit, idealHitRate: 0.8, ttft: { ...wr.keyless.ttft, p50: keylessP50, n: keylessTurns } },
  })]);
  assert.equal(byName(keys(0.77, 105), '(hit rate)').met, true);
  assert.equal(byName(keys(0.75, 105), '(hit rate)').met, false);
  assert.equal(byName(keys(0.8, 105), 'TTFT p50').met, true);
  assert.equal(byName(keys(0.8, 106), 'TTFT p50').met, false);
  // Too few turns for a p50 verdict: measured and shown, not judged either way.
  const few = byName(keys(0.8, 106, MIN_TURNS_FOR_P50 - 1), 'TTFT p50');
  assert.equal(few.met, null);
  assert.match(goalLine(few), /^not judged .*1\.06× \(p50s of 99 and 300 turns\): too few turns/);
});

test('a goal whose strategy was not run is listed as not measured, never dropped', () => {
  const r = syntheticResult();
  const onlyRr = checkGoals([r.summaries[0]]);
  assert.equal(onlyRr.length, 6);
  assert.ok(onlyRr.every((g) => g.met === null));
  assert.match(goalLine(onlyRr[1]), /^not measured .*needs affinity and oracle/);
  const full = checkGoals(r.summaries);
  assert.equal(full.length, 6);
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

test('the p90 goal is judged against the oracle placement; round-robin ratios are references with no verdict', () => {
  const r = syntheticResult({ oracle: true });
  const [rr, wr, oracle] = r.summaries;
  assert.equal(oracle.strategy, 'oracle');
  const at = (rrP90: number, wrP90: number, oracleP90: number) => {
    const ss = [tweak(rr, { ttft: { ...rr.ttft, p90: rrP90 } }), tweak(wr, { ttft: { ...wr.ttft, p90: wrP90 } }), tweak(oracle, { ttft: { ...oracle.ttft, p90: oracleP90 } })];
    return { goals: checkGoals(ss), refs: checkReferences(ss) };
  };
  // Round-robin only 2× slower: nothing to do with the verdict, which compares with the oracle.
  const { goals, refs } = at(220, 110, 100);
  assert.equal(goals.length, 6);
  const p90 = goals[1];
  assert.equal(p90.met, true);
  assert.equal(p90.measured, '110 ms vs 100 ms = 1.10×');
  assert.match(goalLine(p90), /^met +warmroute TTFT p90 ≤ 1\.1× the oracle placement's: 110 ms vs 100 ms = 1\.10×$/);
  assert.ok(goals.every((g) => !/round-robin/.test(g.name)), 'no goal is a ratio to round-robin');
  assert.deepEqual(refs.map((x) => x.measured), ['220 ms vs 110 ms = 2.00×', '220 ms vs 100 ms = 2.20×']);
  assert.match(referenceLine(refs[0]), /^reference +round-robin TTFT p90 over warmroute's: 220 ms vs 110 ms = 2\.00×$/);

  // A router that falls short of the oracle is NOT met, however far ahead of round-robin it is.
  const short = at(1000, 150, 100);
  assert.equal(short.goals[1].met, false);
  assert.equal(short.goals[1].measured, '150 ms vs 100 ms = 1.50×');
  assert.match(short.refs[0].measured, /= 6\.67×$/);
});

test('without the oracle the p90 goal and its reference say not measured; the other goals are unchanged', () => {
  const r = syntheticResult();
  const goals = checkGoals(r.summaries);
  assert.equal(goals[1].met, null);
  assert.equal(goals[1].measured, 'not measured (needs affinity and oracle)');
  assert.deepEqual(goals.map((g) => g.met).filter((_, i) => i !== 1), checkGoals(syntheticResult({ oracle: true }).summaries).map((g) => g.met).filter((_, i) => i !== 1));
  assert.match(referenceLine(checkReferences(r.summaries)[1]), /^reference +.*not measured \(needs round-robin and oracle\)$/);
});

test('a failed request through warmroute is a goal NOT met, whatever the other figures; N gateways get their own goal', () => {
  const r = syntheticResult();
  const [rr, wr] = r.summaries;
  const failed = (gs: ReturnType<typeof checkGoals>) => gs.find((g) => g.name === 'no failed request through warmroute')!;
  assert.equal(failed(checkGoals([rr, wr])).met, wr.errors === 0);
  assert.equal(failed(checkGoals([rr, tweak(wr, { errors: 0 })])).met, true);
  const three = tweak(wr, { strategy: 'affinity@3', errors: 2, hitRate: wr.hitRate! - 0.03 });
  const gs = checkGoals([rr, tweak(wr, { errors: 0 }), three]);
  assert.equal(gs.length, 7);
  assert.equal(failed(gs).met, false, 'the errors of the 3-gateway run count too');
  const hit = gs.find((g) => g.name === 'hit rate with 3 gateways within 2 points of 1')!;
  assert.equal(hit.met, false, '3 points apart');
  assert.match(goalLine(hit), /^NOT met .*\(3\.0 points\)/);
});
