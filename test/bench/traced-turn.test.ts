// The demo's traced turn: every request of a traced run starts a trace of its own; the turn shown
// is round-robin's p90 request beside warmroute's same request, each split from its trace (the
// gateway's SERVER span, the simulated replica's llm_request) as the client saw it.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startOtlpCollector, type OtlpCollector } from '../../bench/lib/otlp-collector.js';
import { pickTracedTurn, tracedTurnHtml, tracedTurnLines } from '../../bench/report/traced-turn.js';
import { startFleet, type SimFleet } from '../../bench/sim/index.js';
import { runStrategy, type TurnRecord } from '../../bench/voice/run.js';
import { buildWorkload } from '../../bench/voice/workload.js';
import { startGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';

describe('the demo\'s traced turn', () => {
  let col: OtlpCollector;
  let fleet: SimFleet;
  const records: TurnRecord[] = [];
  before(async () => {
    col = await startOtlpCollector();
    fleet = await startFleet({ replicas: 2, outputTokens: { min: 10, max: 20 }, otlpTracesEndpoint: `${col.url}/v1/traces` });
    // Two keyed sessions of three turns, no think time: round-robin alternates their replicas
    // (a cold prefill on every other turn), warmroute keeps each on its pin.
    const workload = buildWorkload({ sessions: 2, turns: 3, groups: 1, keylessShare: 0, thinkMs: [0, 0], startSpreadMs: 0, systemTokens: [2000, 2000], toolTurnShare: 0 });
    for (const strategy of ['round-robin', 'affinity']) {
      for (const r of fleet.replicas) r.reset();
      const g = await startGateway(fleet.urls, { routing: { strategy }, tracing: { endpoint: col.url, protocol: 'http/json', batch: { scheduledDelayMs: 20 } } }, { env: {} });
      try {
        const run = await runStrategy({ url: g.url, strategy, workload, maxDurationMs: 20_000, requestTimeoutMs: 10_000, traced: true });
        records.push(...run.records);
      } finally {
        await g.close();
      }
    }
  });
  after(async () => {
    await fleet.close();
    await col.close();
  });

  it('each request a trace of its own; round-robin\'s p90 request and warmroute\'s same one, as their traces tell them', async () => {
    assert.equal(records.length, 12);
    assert.ok(records.every((r) => r.ok && /^[0-9a-f]{32}$/.test(r.traceId ?? '')));
    assert.equal(new Set(records.map((r) => r.traceId)).size, 12);
    const whole = (id: string) => ['llm_request', 'POST /v1/chat/completions'].every((n) => col.trace(id)?.spans.some((s) => s.operationName === n));
    await waitFor('every trace whole', () => records.every((r) => whole(r.traceId!)), 10_000);

    const t = pickTracedTurn(records, 'round-robin', 'affinity', (id) => col.trace(id));
    assert.ok(t);
    const [slow, fast] = t.sides;
    assert.deepEqual([slow.strategy, fast.strategy], ['round-robin', 'affinity']);
    assert.deepEqual([fast.record.session, fast.record.turn, fast.record.step], [t.session, t.turn, t.step]);
    const rr = records.filter((r) => r.strategy === 'round-robin').sort((a, b) => a.ttftMs! - b.ttftMs!);
    assert.equal(slow.record, rr[Math.floor(0.9 * (rr.length - 1))], 'round-robin\'s p90 request');
    for (const s of t.sides) {
      // The trace and the client agree: the cached tokens the gateway's span recorded are those the client was told.
      assert.equal(s.trace.gateway!.cachedTokens, s.record.cachedTokens);
      assert.equal(`${s.trace.gateway!.route}`, s.record.route);
      assert.ok(s.trace.replica!.prefillMs! > 0 && s.record.ttftMs! >= s.trace.replica!.ttftMs!);
    }
    const lines = tracedTurnLines(t).join('\n');
    assert.match(lines, new RegExp(`session ${t.session}, turn ${t.turn + 1}: round-robin's p90`));
    assert.match(lines, /round-robin\s+\d+\.\d\s+\d+\.\d\d\s+\d+\.\d\s+\d+\.\d\s+\d+\.\d\s+[\d,]+ \/ [\d,]+\s+127\.0\.0\.1:\d+ · round-robin/);
    assert.match(lines, /warmroute\s+.*· (pinned|placed|prefix)/);
    const html = tracedTurnHtml(t);
    assert.equal(html.match(/<svg /g)?.length, 2, 'a waterfall per request');
  });

  it('no pair with both traces whole: says so instead of a row', () => {
    assert.equal(pickTracedTurn(records, 'round-robin', 'affinity', () => null), null);
    assert.match(tracedTurnLines(null).join('\n'), /no round-robin request with warmroute's same request/);
  });
});
