// vLLM's realtime transcription endpoint (`/v1/realtime`, a WebSocket: vllm/entrypoints/
// speech_to_text/realtime/ in vLLM 0.32), as its connection handler and protocol module define it. The server speaks first
// (`session.created`); the client validates its model with `session.update` (a missing or unknown
// model is an error event and leaves the session unvalidated), starts a generation
// with `input_audio_buffer.commit`, streams base64 PCM16 in `input_audio_buffer.append` events,
// and ends the audio with a commit `{"final": true}`. The generation answers with one
// `transcription.delta` per chunk of audio it consumed, then `transcription.done` with the whole
// text and usage once the audio has ended; the next commit starts the next utterance. Problems are
// `{"type":"error","error":message,"code"}` events on the open connection, never a close. Frames
// come from the `ws` library; the text is a deterministic function of the audio's length.

import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { randomUUID } from 'node:crypto';
import { WebSocketServer, type WebSocket } from 'ws';

export interface RealtimeOptions {
  /** Delay before each delta, ms: the engine's step for a chunk of audio. */
  readonly stepMs: number;
  /** Audio samples (16 kHz PCM16) per generated token. */
  readonly samplesPerToken: number;
  /** The model it serves: session.update must name it. */
  readonly model: string;
}

export interface Realtime {
  /** Open connections. */
  readonly open: () => number;
  /** Utterances transcribed to their `transcription.done`. */
  readonly done: () => number;
  /** Drops every connection, as a crashed process does (no close frame). */
  dropAll(): void;
  close(): Promise<void>;
}

const WORDS = ['hello', 'I', 'would', 'like', 'a', 'table', 'for', 'two', 'tomorrow', 'at', 'seven', 'please'];

/** pydantic's model_dump_json of the protocol's events: every field, nulls included, in declaration order. */
const sessionCreated = () => JSON.stringify({ type: 'session.created', id: `sess-${randomUUID().replaceAll('-', '')}`, created: Math.floor(Date.now() / 1000) });
const errorEvent = (error: string, code: string | null) => JSON.stringify({ type: 'error', error, code });
const delta = (text: string) => JSON.stringify({ type: 'transcription.delta', delta: text });
const doneEvent = (text: string, prompt: number, completion: number) =>
  JSON.stringify({ type: 'transcription.done', text, usage: { prompt_tokens: prompt, total_tokens: prompt + completion, completion_tokens: completion, prompt_tokens_details: null } });

/** One connection's state: its audio queue (sample counts; null ends the audio) and its generation. */
function serve(ws: WebSocket, o: RealtimeOptions, finished: () => void): void {
  let validated = false;
  let queue: (number | null)[] = [];
  let wake: (() => void) | null = null;
  let generating = false;
  let connected = true;
  const send = (text: string) => { if (connected) ws.send(text); };
  const next = (): Promise<number | null> => new Promise((resolve) => {
    const take = () => resolve(queue.shift() as number | null);
    if (queue.length > 0) take();
    else wake = take;
  });
  const push = (v: number | null) => {
    queue.push(v);
    const w = wake;
    wake = null;
    w?.();
  };

  async function generate(): Promise<void> {
    generating = true;
    let text = '';
    let prompt = 0;
    let completion = 0;
    let carry = 0;
    for (;;) {
      const samples = await next();
      if (samples === null || !connected) break;
      prompt += Math.ceil(samples / o.samplesPerToken);
      carry += samples;
      let piece = '';
      while (carry >= o.samplesPerToken) {
        carry -= o.samplesPerToken;
        piece += `${text === '' && piece === '' ? '' : ' '}${WORDS[completion++ % WORDS.length]}`;
      }
      await new Promise((r) => setTimeout(r, o.stepMs));
      if (piece === '') continue;
      text += piece;
      send(delta(piece));
    }
    generating = false;
    if (!connected) return;
    send(doneEvent(text, prompt, completion));
    finished();
    // The queue is cleared for the next utterance.
    queue = [];
  }

  ws.on('message', (data, isBinary) => {
    let event: Record<string, unknown>;
    try {
      event = JSON.parse(isBinary ? '' : data.toString()) as Record<string, unknown>;
    } catch {
      return send(errorEvent('Invalid JSON', 'invalid_json'));
    }
    switch (event.type) {
      case 'session.update':
        if (event.model === undefined || event.model === null) return send(errorEvent('Missing required field: model', 'invalid_event'));
        if (event.model !== o.model) return send(errorEvent(`The model \`${String(event.model)}\` does not exist.`, 'model_not_found'));
        validated = true;
        return;
      case 'input_audio_buffer.append': {
        // pydantic's validation error, answered by the connection's catch-all.
        if (typeof event.audio !== 'string') return send(errorEvent('1 validation error for InputAudioBufferAppend\naudio\n  Field required', 'processing_error'));
        const audio = Buffer.from(event.audio, 'base64');
        if (audio.length < 2) return send(errorEvent('Invalid audio data', 'invalid_audio'));
        push(audio.length >> 1);
        return;
      }
      case 'input_audio_buffer.commit':
        if (!validated) return send(errorEvent('Model not validated. Make sure to validate the model by sending a session.update event.', 'model_not_validated'));
        if (event.final === true) return push(null);
        // A commit while a generation runs is ignored (vLLM logs a warning).
        if (!generating) void generate();
        return;
      default:
        // Python's str() of a missing type.
        return send(errorEvent(`Unknown event type: ${event.type === undefined || event.type === null ? 'None' : String(event.type)}`, 'unknown_event'));
    }
  });
  ws.on('close', () => {
    connected = false;
    push(null);
  });
  ws.on('error', () => {});
  send(sessionCreated());
}

/** Serves `/v1/realtime` upgrades on `server`; any other upgrade is refused with a 404. */
export function attachRealtime(server: Server, o: RealtimeOptions): Realtime {
  const wss = new WebSocketServer({ noServer: true });
  let done = 0;
  const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    if ((req.url ?? '').split('?', 1)[0] !== '/v1/realtime') {
      socket.end('HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: 22\r\nconnection: close\r\n\r\n{"detail":"Not Found"}');
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => serve(ws, o, () => { done++; }));
  };
  server.on('upgrade', onUpgrade);
  const dropAll = () => { for (const c of wss.clients) c.terminate(); };
  return {
    open: () => wss.clients.size,
    done: () => done,
    dropAll,
    close: () => new Promise<void>((resolve) => {
      server.off('upgrade', onUpgrade);
      dropAll();
      wss.close(() => resolve());
    }),
  };
}
