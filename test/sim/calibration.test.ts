// The simulator with DEFAULT settings must reproduce the field report's self-hosted H100 figures
// (shared/seeds/000) within ±20%, measured over HTTP the way the report did. A batch of trials
// that misses is measured again (at most three batches): timer lag on a loaded 2-core machine
// comes and goes, a mis-calibrated model does not.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { measureFresh, measureRepeat, measureTiny, PROBE_TOKENS, settle, TARGETS, within } from '../../bench/sim/calibration.js';
import { median, percentile } from '../../bench/sim/probe.js';
import { runVoice, VOICE_DEFAULTS } from '../../bench/sim/voice.js';
import { agent, replica } from './helpers.js';

function check(t: { diagnostic(s: string): void }, label: string, seen: number[], target: number): void {
  const last = seen[seen.length - 1];
  t.diagnostic(`${label}: ${seen.map((v) => v.toFixed(1)).join(' → ')} ms (target ${target} ms)`);
  assert.ok(within(last, target), `${label}: ${last.toFixed(1)} ms is not within ±20% of ${target} ms`);
}

test('single-request TTFTs match the report', async (t) => {
  const r = await replica(t);
  await t.test(`tiny ~${PROBE_TOKENS.tiny}-token prompt, warm: ${TARGETS.tiny} ms`, async (s) => {
    check(s, 'tiny', await settle(() => measureTiny(r.url, agent), TARGETS.tiny), TARGETS.tiny);
  });
  await t.test(`fresh ${PROBE_TOKENS.fresh1k}-token prompt: ${TARGETS.fresh1k} ms`, async (s) => {
    const seen = await settle(() => measureFresh(r.url, agent, PROBE_TOKENS.fresh1k, 5), TARGETS.fresh1k);
    check(s, 'fresh 1K', seen, TARGETS.fresh1k);
  });
  await t.test(`cold ${PROBE_TOKENS.cold5k}-token prefill: ${TARGETS.cold5k} ms`, async (s) => {
    const seen = await settle(() => measureFresh(r.url, agent, PROBE_TOKENS.cold5k, 3), TARGETS.cold5k);
    check(s, 'cold 5.5K', seen, TARGETS.cold5k);
  });
  await t.test(`repeated ${PROBE_TOKENS.repeat9k}-token prefix: ${TARGETS.repeat9k} ms`, async (s) => {
    const seen = await settle(() => measureRepeat(r.url, agent, PROBE_TOKENS.repeat9k), TARGETS.repeat9k);
    check(s, 'repeated 9K', seen, TARGETS.repeat9k);
  });
});

test('50 concurrent voice sessions on one replica: p50 and p95 match the report', async (t) => {
  const r = await replica(t);
  const p50s: number[] = [];
  const p95s: number[] = [];
  // Four turns per session (three measured, ~150 samples) keeps this near 13 s.
  for (let attempt = 0; attempt < 2; attempt++) {
    r.reset();
    const v = await runVoice({ ...VOICE_DEFAULTS, turns: 4, seed: 1 + attempt, url: r.url, agent });
    assert.equal(v.errors, 0);
    assert.ok(v.cachedShare > 0.9, 'caches are warm');
    p50s.push(median(v.ttfts));
    p95s.push(percentile(v.ttfts, 95));
    if (within(p50s[attempt], TARGETS.voiceP50) && within(p95s[attempt], TARGETS.voiceP95)) break;
  }
  check(t, 'voice p50', p50s, TARGETS.voiceP50);
  check(t, 'voice p95', p95s, TARGETS.voiceP95);
});
