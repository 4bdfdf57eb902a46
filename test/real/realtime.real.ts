// Realtime transcription relayed to a real vLLM replica (a tiny random-weight Qwen3-ASR realtime
// model, bench/real/make-realtime-model.py): audio streamed, committed, the transcript's deltas and
// done relayed, the gateway's per-utterance timings and every slot given back. Runs only against
// a fleet started with its realtime replica (`npm run fleet:vllm -- --realtime`); skipped
// otherwise, so that `npm run test:real` never restarts a running fleet for it.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { readState, type FleetState } from '../../bench/real/fleet-vllm.js';
import { RealtimeSession, pcm16 } from '../../bench/real/realtime-probe.js';
import { healthy } from '../../bench/real/vllm-replica.js';
import { accessLines, startGateway, type TestGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';
import { RUN } from './real-fleet.js';

const state = readState();
const up = state?.realtime !== undefined && await healthy(state.realtime.url)
  && (await Promise.all(state.replicas.map((r) => healthy(r.url)))).every(Boolean);
const skip = up ? false : 'needs a running fleet with its realtime replica: npm run fleet:vllm -- --realtime';

const metricsText = async (g: TestGateway) => (await request(`${g.adminUrl}/metrics`)).body.text();
const series = (text: string, name: string, labels: string) => Number(new RegExp(`^${name}\\{${labels}\\} (\\S+)$`, 'm').exec(text)?.[1] ?? 0);
const of = (replica: string) => `replica="${replica}"`;
const ws = (g: TestGateway, query: string) => `${g.url.replace(/^http/, 'ws')}/v1/realtime${query}`;

describe('real vLLM: realtime transcription', { skip }, () => {
  let f: FleetState;
  let g: TestGateway;
  before(async () => {
    f = state!;
    // The LLM replicas too: a realtime connection must find the one replica whose model has the
    // realtime task among replicas that serve other models.
    g = await startGateway([], { upstreams: [...f.replicas, f.realtime!].map((r) => ({ name: r.name, url: r.url })) });
    await waitFor('replicas up with their models', () => g.gw.registry.replicas.every((r) => r.up && r.models !== null), 30_000);
  });
  after(async () => { await g?.close(); });

  it('streams audio, commits, and relays the deltas and the done of each utterance; the gateway times them', async () => {
    const rt = f.realtime!;
    const s = await RealtimeSession.open(ws(g, `?model=${rt.model}&session_id=${RUN}-call`), rt.model);
    // 2 s and 6 s: the second is two segments for vLLM (it cuts at 5 s), two prompts in one request.
    const lengths = [2, 6];
    const got = [];
    try {
      for (const [i, seconds] of lengths.entries()) got.push(await s.utterance(pcm16(seconds, i + 1), 120_000));
    } finally { await s.close(); }
    for (const u of got) {
      assert.ok(u.deltas > 0, 'transcription.delta relayed');
      assert.ok(u.firstDeltaMs >= 0 && u.firstDeltaMs <= u.doneMs);
      assert.ok(u.text.length > 0, 'transcription.done carries the transcript');
    }
    // vLLM generates up to 64 tokens per segment: the two-segment utterance has more to say.
    assert.ok(got[1].deltas > 64 || got[1].text.length > got[0].text.length, `two segments, two transcripts: ${JSON.stringify(got.map((u) => u.deltas))}`);

    await waitFor('the connection closed and its slots back', () => g.gw.realtime.open === 0, 5_000);
    const text = await metricsText(g);
    assert.equal(series(text, 'warmroute_realtime_first_delta_seconds_count', of(rt.name)), lengths.length);
    assert.equal(series(text, 'warmroute_realtime_done_seconds_count', of(rt.name)), lengths.length);
    assert.ok(series(text, 'warmroute_realtime_done_seconds_sum', of(rt.name)) >= series(text, 'warmroute_realtime_first_delta_seconds_sum', of(rt.name)));
    assert.equal(series(text, 'warmroute_realtime_connections', of(rt.name)), 0);
    const line = accessLines(g.logs).find((l) => l.path === '/v1/realtime');
    assert.ok(line, 'an access line for the connection');
    assert.equal(line.replica, rt.name);
    assert.equal(line.utterances, lengths.length);
    assert.equal(line.closeCode, 1000);
  });

  it('a connection that names no model goes to the realtime replica, past any replica without the realtime task', async () => {
    const rt = f.realtime!;
    const before = await metricsText(g);
    const replaced = (text: string, r: string) => series(text, 'warmroute_realtime_replaced_total', `${of(r)},cause="status"`);
    const allTried = async () => { const now = await metricsText(g); return f.replicas.every((r) => replaced(now, r.name) > replaced(before, r.name)); };
    // Without ?model= every replica is a candidate. A vLLM replica whose model has no realtime task
    // has no WebSocket route there and answers the upgrade with 403; the gateway replaces it before
    // the client is answered. Ties among idle replicas rotate, so connections follow one another
    // until each LLM replica has been tried (bounded: the rotation reaches each within a few).
    let n = 0;
    while (n < 4 * (f.replicas.length + 1) && !(n > 0 && await allTried())) {
      const s = await RealtimeSession.open(ws(g, ''), rt.model);
      try {
        const u = await s.utterance(pcm16(1, 10 + n), 60_000);
        assert.ok(u.deltas > 0);
      } finally { await s.close(); }
      n++;
      await waitFor('the connection closed', () => g.gw.realtime.open === 0, 5_000);
    }
    assert.ok(await allTried(), `every LLM replica tried and replaced on its HTTP status in ${n} connections`);
    const lines = accessLines(g.logs).filter((l) => l.path === '/v1/realtime').slice(-n);
    assert.deepEqual(lines.map((l) => l.replica), lines.map(() => rt.name));
    const after = await metricsText(g);
    assert.equal(series(after, 'warmroute_realtime_done_seconds_count', of(rt.name)) - series(before, 'warmroute_realtime_done_seconds_count', of(rt.name)), n);
  });
});
