import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runBench } from '../../bench/voice/bench.js';
import { checkReferences } from '../../bench/voice/goals.js';
import { markdownReport } from '../../bench/voice/markdown.js';
import { inflightFromRecords, oraclePlan, oracleTargets, replicaName } from '../../bench/voice/oracle.js';
import { runStrategy } from '../../bench/voice/run.js';
import { buildWorkload } from '../../bench/voice/workload.js';
import { record } from './fixtures.js';

test('the oracle plan: session i on replica i mod R, session counts as even as they can be', () => {
  assert.deepEqual(oraclePlan(4, 2), [0, 1, 0, 1]);
  assert.deepEqual(oraclePlan(7, 3), [0, 1, 2, 0, 1, 2, 0]);
  assert.deepEqual(oraclePlan(50, 4).reduce((n, r) => { n[r]++; return n; }, [0, 0, 0, 0]), [13, 13, 12, 12]);
  assert.throws(() => oraclePlan(3, 0));
  // Named as the gateway names an --upstream, so per-replica tables line up across strategies.
  assert.equal(replicaName('http://127.0.0.1:41231'), '127.0.0.1:41231');
  assert.deepEqual(oracleTargets(3, ['http://127.0.0.1:1001', 'http://127.0.0.1:1002']).map((t) => t.replica), ['127.0.0.1:1001', '127.0.0.1:1002', '127.0.0.1:1001']);
});

test('in flight from the records: sampled like the gateway poll, every replica listed', () => {
  const rows = [
    record({ strategy: 'oracle', session: 0, turn: 0, ttftMs: 50, replica: 'a', sentMs: 0, totalMs: 600 }),
    record({ strategy: 'oracle', session: 2, turn: 0, ttftMs: 50, replica: 'a', sentMs: 100, totalMs: 300 }),
    record({ strategy: 'oracle', session: 1, turn: 0, ttftMs: 50, replica: 'b', sentMs: 300, totalMs: 100 }),
  ];
  // Samples at 0, 250, 500, 750 ms: a has 1, 2, 1, 0; b has 0, 0, 0, 0 (its request fell between samples); c idle.
  const f = inflightFromRecords(rows, ['a', 'b', 'c'], 750, 250);
  assert.deepEqual(f.peak, { a: 2, b: 0, c: 0 });
  assert.deepEqual(f.mean, { a: 1, b: 0, c: 0 });
});

test('a run needs a gateway url or a direct replica for every session', async () => {
  const workload = buildWorkload({ sessions: 2, turns: 1 });
  await assert.rejects(runStrategy({ strategy: 'x', workload, maxDurationMs: 1000, requestTimeoutMs: 1000 }), /no gateway url/);
});

test('bench:voice with strategy oracle: no gateway, every request of session i on replica i mod 2, the usual fields', { timeout: 60_000 }, async () => {
  const result = await runBench({
    replicas: 2, strategies: ['oracle'], outputTokens: [20, 40], maxDurationS: 20, requestTimeoutS: 10, budgetMs: 300, warmup: true,
    workload: { sessions: 4, turns: 2, groups: 2, systemTokens: [300, 400], thinkMs: [0, 0], startSpreadMs: 0, toolTurnShare: 0, keylessShare: 0.25 },
  }, () => {});
  const recs = result.records;
  assert.equal(recs.length, 8);
  const names = [...new Set(recs.map((r) => r.replica))];
  assert.equal(names.length, 2);
  for (const r of recs) {
    assert.ok(r.ok, `${r.session}/${r.turn}: ${r.error}`);
    assert.equal(r.strategy, 'oracle');
    assert.match(r.replica ?? '', /^127\.0\.0\.1:\d+$/);
    // Session i on replica i mod 2, and the same one for every turn.
    assert.equal(r.replica, recs.find((x) => x.session === r.session % 2 && x.turn === 0)!.replica);
    assert.notEqual(r.replica, recs.find((x) => x.session === (r.session + 1) % 2)!.replica);
    assert.ok(r.ttftMs! > 0 && r.ttftMs! <= r.totalMs);
    assert.ok(r.promptTokens! > 300 && r.cachedTokens !== null && r.completionTokens! > 0);
    assert.ok(r.idealCachedTokens !== null);
    // What only the gateway knows is absent.
    assert.equal(r.route, null);
    assert.deepEqual(r.hops, {});
  }
  // Perfect stickiness: the second turn hits the first one's prompt (bar the last partial block).
  for (let s = 0; s < 4; s++) {
    const [t0, t1] = [0, 1].map((t) => recs.find((r) => r.session === s && r.turn === t)!);
    assert.ok(t1.cachedTokens! >= t0.promptTokens! - 16, `session ${s}: cached ${t1.cachedTokens} of ${t1.promptTokens}, first prompt ${t0.promptTokens}`);
  }
  const [s] = result.summaries;
  assert.equal(s.errors, 0);
  assert.deepEqual(Object.values(s.load.served), [4, 4]);
  assert.equal(s.load.maxOverAvg, 1);
  assert.deepEqual(Object.keys(s.load.peakInflight).sort(), names.sort());
  assert.equal(s.hitRate, s.clientHitRate); // the fleet's counters and the usage chunks agree
  assert.ok(s.hitRate! <= s.idealHitRate! + 1e-9);
  assert.equal(s.keyless.sessions, 1);
  assert.equal(s.overhead.p50Ms, null);
  assert.deepEqual(s.routes, {});
  assert.ok(s.hopsMeanMs.first_token! > 0);
  assert.equal(result.goals.length, 6);
  assert.equal(result.goals[1].measured, 'not measured (needs affinity and oracle)');
  assert.match(checkReferences(result.summaries)[1].measured, /needs round-robin and oracle/);
  assert.match(markdownReport(result), /^\| oracle .* \| — \|$/m);
});
