// The simulator's /v1/realtime: vLLM's realtime transcription protocol over a WebSocket.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import WebSocket from 'ws';
import { FAST, replica, waitFor } from './helpers.js';

/** A client that keeps every event the server sent, parsed. */
async function connect(url: string): Promise<{ ws: WebSocket; events: Record<string, any>[]; send(e: object): void }> {
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/v1/realtime`);
  const events: Record<string, any>[] = [];
  ws.on('message', (d) => events.push(JSON.parse(d.toString()) as Record<string, any>));
  await new Promise<void>((resolve, reject) => { ws.once('open', () => resolve()); ws.once('error', reject); });
  return { ws, events, send: (e) => ws.send(JSON.stringify(e)) };
}

/** `ms` of 16 kHz PCM16 silence, base64. */
const audio = (ms: number) => Buffer.alloc(16 * ms * 2).toString('base64');

describe('simulator: realtime transcription', () => {
  it('speaks first, then transcribes an utterance: deltas as audio arrives, done with the whole text and usage', async (t) => {
    const r = await replica(t, FAST);
    const c = await connect(r.url);
    t.after(() => c.ws.close());
    await waitFor(() => c.events.length === 1, 10_000, 'session.created');
    assert.deepEqual(Object.keys(c.events[0]), ['type', 'id', 'created']);
    assert.equal(c.events[0].type, 'session.created');
    assert.match(c.events[0].id, /^sess-[0-9a-f]{32}$/);
    c.send({ type: 'session.update', model: r.config.model });
    c.send({ type: 'input_audio_buffer.commit' });
    for (let i = 0; i < 10; i++) c.send({ type: 'input_audio_buffer.append', audio: audio(40) });
    c.send({ type: 'input_audio_buffer.commit', final: true });
    await waitFor(() => c.events.some((e) => e.type === 'transcription.done'), 10_000, 'transcription.done');
    const deltas = c.events.filter((e) => e.type === 'transcription.delta').map((e) => e.delta as string);
    const done = c.events.find((e) => e.type === 'transcription.done')!;
    assert.ok(deltas.length >= 2, `${deltas.length} deltas`);
    assert.equal(done.text, deltas.join(''));
    assert.deepEqual(Object.keys(done.usage), ['prompt_tokens', 'total_tokens', 'completion_tokens', 'prompt_tokens_details']);
    assert.equal(done.usage.completion_tokens, 5, '400 ms of audio at 80 ms a token');
    assert.equal(r.realtime.done(), 1);
    assert.equal(r.realtime.open(), 1);
  });

  it('answers problems with error events on the open connection, and a crash drops it', async (t) => {
    const r = await replica(t, FAST);
    const c = await connect(r.url);
    c.send({ type: 'input_audio_buffer.commit' });
    c.ws.send('{not json');
    c.send({ type: 'response.create' });
    c.send({ type: 'session.update', model: r.config.model });
    c.send({ type: 'input_audio_buffer.append', audio: '' });
    c.send({ type: 'session.update' });
    c.send({ type: 'session.update', model: 'no-such-model' });
    c.send({ type: 'input_audio_buffer.append' });
    c.send({ audio: 'AAAA' });
    await waitFor(() => c.events.filter((e) => e.type === 'error').length === 8, 10_000, 'eight errors');
    const errs = c.events.filter((e) => e.type === 'error');
    assert.deepEqual(errs.map((e) => e.code), ['model_not_validated', 'invalid_json', 'unknown_event', 'invalid_audio', 'invalid_event', 'model_not_found', 'processing_error', 'unknown_event']);
    assert.equal(errs[4].error, 'Missing required field: model');
    assert.equal(errs[5].error, 'The model `no-such-model` does not exist.');
    assert.equal(errs[7].error, 'Unknown event type: None');
    assert.deepEqual(Object.keys(c.events[1]), ['type', 'error', 'code']);
    const other = new WebSocket(`${r.url.replace(/^http/, 'ws')}/v1/other`);
    other.on('error', () => {});
    assert.equal(await new Promise<number>((resolve) => other.once('unexpected-response', (_req, res) => { res.resume(); resolve(res.statusCode ?? 0); })), 404, 'no other path upgrades');
    const closed = new Promise<number>((resolve) => c.ws.once('close', (code) => resolve(code)));
    r.fault({ kind: 'crash' });
    assert.equal(await closed, 1006, 'no close frame from a dead process');
    assert.equal(r.realtime.open(), 0);
  });
});
