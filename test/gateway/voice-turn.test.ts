// One voice turn, both halves: a realtime connection's transcription.done joined to the first token
// of the next chat request of the same session key (histogram, access line, span link).

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SpanKind } from '@opentelemetry/api';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace';
import { request } from 'undici';
import WebSocket from 'ws';
import { DEFAULT_MODEL, startReplica } from '../../bench/sim/index.js';
import { FAST } from '../sim/helpers.js';
import { accessLines, startGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';

const audio = (ms: number) => Buffer.alloc(16 * ms * 2).toString('base64');

async function chat(url: string, session: string | null, content: string): Promise<void> {
  const res = await request(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(session === null ? {} : { 'x-session-id': session }) },
    body: JSON.stringify({ model: DEFAULT_MODEL, max_tokens: 4, stream: true, messages: [{ role: 'user', content }] }),
  });
  await res.body.text();
  assert.equal(res.statusCode, 200);
}

describe('voice turn', () => {
  it('joins the caller\'s transcription.done to the first token of the session\'s next chat request', async () => {
    const s = await startReplica(FAST, 0);
    const mem = new InMemorySpanExporter();
    const g = await startGateway([s.url], { tracing: { tracesEndpoint: 'http://127.0.0.1:9/v1/traces', batch: { scheduledDelayMs: 5 } } }, { env: {}, traceExporter: mem });
    try {
      await waitFor('replica up', () => g.gw.registry.replicas.every((r) => r.up), 5_000);
      const ws = new WebSocket(`${g.url.replace(/^http/, 'ws')}/v1/realtime?session_id=call-9`);
      const got: string[] = [];
      ws.on('message', (d) => got.push(d.toString()));
      await new Promise<void>((resolve, reject) => { ws.once('open', () => resolve()); ws.once('error', reject); });
      ws.send(JSON.stringify({ type: 'session.update', model: s.config.model }));
      ws.send(JSON.stringify({ type: 'input_audio_buffer.commit' }));
      ws.send(JSON.stringify({ type: 'input_audio_buffer.append', audio: audio(200) }));
      ws.send(JSON.stringify({ type: 'input_audio_buffer.commit', final: true }));
      await waitFor('transcription.done', () => got.some((e) => e.includes('transcription.done')), 10_000);

      await chat(g.url, null, 'not this caller');
      await chat(g.url, 'call-9', 'a table for two please');
      await chat(g.url, 'call-9', 'and a second call of the same turn');
      ws.close();
      const lines = await (async () => {
        await waitFor('three chat lines', () => accessLines(g.logs).filter((l) => l.path === '/v1/chat/completions').length === 3);
        return accessLines(g.logs).filter((l) => l.path === '/v1/chat/completions');
      })();
      assert.equal(lines[0].voiceGapMs, undefined, 'another session');
      assert.ok(lines[1].voiceGapMs > 0, JSON.stringify(lines[1]));
      assert.equal(lines[2].voiceGapMs, undefined, 'the speech end is answered once');
      const metrics = await (await request(`${g.adminUrl}/metrics`)).body.text();
      assert.match(metrics, /^warmroute_voice_turn_gap_seconds_count 1$/m);

      await waitFor('both spans', () => mem.getFinishedSpans().some((sp) => sp.name === 'GET /v1/realtime') && mem.getFinishedSpans().filter((sp) => sp.name === 'POST /v1/chat/completions').length === 3, 10_000);
      const rt = mem.getFinishedSpans().find((sp) => sp.name === 'GET /v1/realtime')!;
      const reply = mem.getFinishedSpans().filter((sp) => sp.kind === SpanKind.SERVER && sp.name === 'POST /v1/chat/completions')[1];
      const link = reply.links.find((l) => l.attributes?.['warmroute.link'] === 'voice_turn_speech_end');
      assert.ok(link, 'the reply links the realtime connection');
      assert.equal(link.context.spanId, rt.spanContext().spanId);
      assert.ok(Math.abs(Number(reply.attributes['warmroute.voice_turn.gap_ms']) - lines[1].voiceGapMs) < 0.001, 'the span and the access line read one clock');
    } finally {
      await g.close();
      await s.close();
    }
  });
});
