import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { buildHtml } from '../../bench/report/html.js';
import { startFleet } from '../../bench/sim/index.js';
import { gatewayMetrics, startGateway, sumSamples } from '../../bench/voice/fleet.js';
import { checkGoals } from '../../bench/voice/goals.js';
import { idealHits } from '../../bench/voice/ideal.js';
import { runStrategy } from '../../bench/voice/run.js';
import { summarize } from '../../bench/voice/summary.js';
import { buildWorkload } from '../../bench/voice/workload.js';

const stops: (() => Promise<void>)[] = [];
after(async () => {
  for (const s of stops.reverse()) await s();
});

test('a tiny voice run through the real gateway and simulator: 2 replicas, 3 sessions × 2 turns', { timeout: 30_000 }, async () => {
  const fleet = await startFleet({ replicas: 2, outputTokens: { min: 20, max: 40 } });
  stops.push(() => fleet.close());
  const gw = await startGateway(fleet.urls, 'affinity');
  stops.push(() => gw.stop());
  // Sessions 0 and 1 keyed (header, body), session 2 keyless.
  const workload = buildWorkload({ sessions: 3, turns: 2, groups: 1, keylessShare: 1 / 3, bodyKeyShare: 0.5, thinkMs: [0, 0], startSpreadMs: 0, systemTokens: [2000, 2000], toolTurnShare: 0 });
  assert.deepEqual(workload.sessions.map((s) => s.keyMode).sort(), ['body', 'header', 'none']);
  const run = await runStrategy({ url: gw.url, strategy: 'affinity', workload, maxDurationMs: 20_000, requestTimeoutMs: 10_000 });

  assert.equal(run.records.length, 6);
  for (const r of run.records) {
    assert.ok(r.ok, `${r.session}/${r.turn}: ${r.error}`);
    assert.ok(r.replica !== null && r.route !== null, 'x-warmroute-replica and x-warmroute-route');
    for (const h of ['parse', 'route', 'queue', 'connect', 'upstream_headers']) assert.ok(h in r.hops, `server-timing ${h}`);
    assert.ok(r.ttftMs! > 0 && r.ttftMs! <= r.totalMs);
    assert.ok(r.promptTokens! > 2000 && r.cachedTokens !== null);
  }
  // Turn 2 of a keyed session stays on its pin (a fresh pin only moves for the hard cap). A keyless
  // one follows its prefix, or may move when the cost model finds that cheaper: with one agent,
  // the other replica holds the same system prompt, so only the first turn would be re-prefilled.
  for (let s = 0; s < 3; s++) {
    const [t0, t1] = [0, 1].map((t) => run.records.find((r) => r.session === s && r.turn === t)!);
    const keyed = workload.sessions[s].keyMode !== 'none';
    const how = `session ${s} (${workload.sessions[s].keyMode}): ${t0.route} → ${t1.route}, cached ${t1.cachedTokens}/${t1.promptTokens}`;
    if (keyed) {
      assert.equal(t1.route, 'pinned', how);
      assert.equal(t1.replica, t0.replica, how);
      assert.ok(t1.cachedTokens! >= t0.promptTokens! - 16, `the second turn hits the first: ${how}`);
    } else {
      assert.ok(t1.route === 'prefix' || t1.route === 'spill', how);
      assert.ok(t1.cachedTokens! >= 2000, `at least the system prompt is warm: ${how}`);
    }
  }

  const ok = run.records.filter((r) => r.ok);
  const ideal = idealHits(run.sent);
  ok.forEach((r, i) => { r.idealCachedTokens = ideal.cached[i]; });
  const metrics = await Promise.all(fleet.urls.map(async (u) => (await fetch(`${u}/metrics`)).text()));
  const counters = {
    queries: metrics.reduce((s, t) => s + sumSamples(t, 'vllm:prefix_cache_queries_total'), 0),
    hits: metrics.reduce((s, t) => s + sumSamples(t, 'vllm:prefix_cache_hits_total'), 0),
  };
  const summary = summarize({
    strategy: 'affinity', records: run.records, durationMs: run.durationMs, truncated: run.truncated, replicas: 2, budgetMs: 300,
    counters, gateway: await gatewayMetrics(gw.adminUrl), inflight: null,
  });
  // The vLLM counters and the usage chunks tell the same story; nothing beats the ideal.
  assert.equal(summary.hitRate, summary.clientHitRate);
  assert.ok(summary.hitRate! <= summary.idealHitRate! + 1e-9);
  assert.ok(summary.overhead.p50Ms !== null && summary.overhead.p50Ms > 0);
  assert.equal(summary.keyless.sessions, 1);
  const html = buildHtml({
    kind: 'warmroute-voice-bench', when: new Date().toISOString(), machine: { cpus: 2, cpu: 'test', node: process.version },
    params: { replicas: 2, strategies: ['affinity'], outputTokens: [20, 40], maxDurationS: 20, requestTimeoutS: 10, budgetMs: 300, warmup: false, workload: workload.options, plannedRequests: 6 },
    summaries: [summary], goals: checkGoals([summary]), records: run.records, wallMs: run.durationMs,
  });
  assert.match(html, /warmroute \(affinity\)/);
});
