// The orchestrated agent through a real gateway child and simulated replicas: the gateway's own
// turn figures (GET /admin/sessions/{key}) match the client's measurement of the same turns.

import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { startFleet } from '../../bench/sim/index.js';
import { startGateway } from '../../bench/voice/fleet.js';
import { callsPlan, preCallGroups } from '../../bench/voice/orchestrated.js';
import { runStrategy } from '../../bench/voice/run.js';
import { attachGatewayTurns, summarizeTurns, turnsConfig } from '../../bench/voice/turn-stats.js';
import { buildWorkload } from '../../bench/voice/workload.js';

const stops: (() => Promise<void>)[] = [];
after(async () => {
  for (const s of stops.reverse()) await s();
});

test('the orchestrated plan: canned, direct and 2–6-call turns, the two extractions at once', () => {
  const w = buildWorkload({ sessions: 20, turns: 10 });
  const calls = callsPlan(w, 'orchestrated').flat();
  assert.ok(calls.includes(0) && calls.includes(1) && calls.some((c) => c >= 2));
  assert.ok(calls.every((c) => c >= 0 && c <= 6));
  assert.deepEqual(callsPlan(w, 'single').flat(), calls.map(() => 1));
  assert.deepEqual(preCallGroups(6).map((g) => g.length), [1, 1, 2, 1]);
  assert.deepEqual(preCallGroups(1), []);
});

test('orchestrated turns through the gateway: its turn count, calls and waits are the client\'s', { timeout: 90_000 }, async () => {
  const fleet = await startFleet({ replicas: 2, outputTokens: { min: 10, max: 20 } });
  stops.push(() => fleet.close());
  const workload = buildWorkload({ sessions: 6, turns: 5, groups: 2, keylessShare: 0.5, bodyKeyShare: 0.5, thinkMs: [50, 100], startSpreadMs: 0, systemTokens: [300, 300], toolTurnShare: 0.2 });
  const gw = await startGateway(fleet.urls, 'affinity', [], null, turnsConfig(1000, 250));
  stops.push(() => gw.stop());
  const run = await runStrategy({ url: gw.url, strategy: 'affinity', workload, voiceAgent: 'orchestrated', maxDurationMs: 60_000, requestTimeoutMs: 10_000 });
  assert.ok(run.records.every((r) => r.ok), 'every request answered');
  await attachGatewayTurns(gw.adminUrl, run.turns, 10_000);
  const reached = run.turns.filter((t) => t.calls > 0);
  assert.ok(reached.length > 0 && reached.length < run.turns.length, 'some turns canned, some not');
  for (const t of reached) {
    const where = `session ${t.session} (${workload.sessions[t.session].keyMode}) turn ${t.turn}`;
    assert.equal(t.gatewayCalls, t.calls, `${where}: calls`);
    assert.ok(t.gatewayWaitMs! <= t.waitMs! + 0.5 && t.gatewayWaitMs! > 0, `${where}: gateway ${t.gatewayWaitMs} ms within the client's ${t.waitMs} ms`);
  }
  const s = summarizeTurns(run.turns, run.records, 250);
  assert.equal(s.gateway!.matched, reached.length);
  assert.equal(s.gateway!.callsAgree, reached.length);
  // Per turn, the gateway sees less than the client by the wire (and, on a session's first turn,
  // the client's connection setup): about a millisecond on an idle machine (bench:voice reports
  // it); the bound here leaves room for a loaded test machine's scheduling.
  assert.ok(s.gateway!.medianAbsDiffMs < 20, `median |gateway − client| ${s.gateway!.medianAbsDiffMs} ms`);
});

test('the report shows the per-turn table and chart beside the per-request figures', async () => {
  const { syntheticResult } = await import('./fixtures.js');
  const { buildHtml } = await import('../../bench/report/html.js');
  const { markdownReport } = await import('../../bench/voice/markdown.js');
  const r = syntheticResult({ oracle: true });
  r.turns = r.summaries.flatMap((s) => Array.from({ length: 8 }, (_, i) => ({
    strategy: s.strategy, session: i % 4, turn: Math.floor(i / 4), calls: i % 3 === 0 ? 0 : 1 + (i % 4), overlapped: i % 4 === 3,
    waitMs: i % 3 === 0 ? 0.02 : 100 + 90 * i, ok: true, adminKey: `k${i % 4}`,
    gatewayWaitMs: s.strategy === 'oracle' || i % 3 === 0 ? null : 99 + 90 * i, gatewayCalls: s.strategy === 'oracle' ? null : 1 + (i % 4),
  })));
  for (const s of r.summaries) s.turns = summarizeTurns(r.turns.filter((t) => t.strategy === s.strategy), r.records.filter((x) => x.strategy === s.strategy), r.params.budgetMs);
  const wr = r.summaries.find((s) => s.strategy === 'affinity')!.turns!;
  assert.deepEqual([wr.turns, wr.canned, wr.perTurn.n, wr.gateway!.matched, wr.gateway!.medianAbsDiffMs], [8, 3, 8, 5, 1]);
  const html = buildHtml(r);
  assert.match(html, /<h2 id="turns">Per turn, not just per request<\/h2>/);
  assert.match(html, /Per-turn wait \(solid\) next to per-request TTFT/);
  assert.doesNotMatch(html, /NaN|Infinity|undefined/);
  assert.match(markdownReport(r), /\| per turn: mean ms \| median \| p90 \| p99 \|/);
});
