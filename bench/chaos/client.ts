// The fault suite's client: sends one streamed chat completion and says how it ended, from the
// client's side.
//   completed — the whole answer: status 200, an event stream, and [DONE] (with no error event);
//   explicit  — an error the client can act on: an HTTP error status with an OpenAI error body
//               ({"error": ...}), an `error` event in the stream, or a non-stream body cut short
//               that the client's HTTP library reports as such;
//   silent    — anything else: no answer at all, an event stream that just stops without [DONE]
//               or an error event (an OpenAI SDK returns that as a complete answer), a success
//               status that is not a whole event stream (a 200 JSON body — even one holding an
//               error —, a 204, a 3xx), or no end within the deadline.

import { Agent, request } from 'undici';
import { createSseEvents } from '../../src/stream/sse-events.js';

export type Ending = 'completed' | 'explicit' | 'silent';

export interface Ended {
  ending: Ending;
  status: number;
  detail: string;
}

export interface SendOptions {
  headers?: Record<string, string>;
  /** The whole exchange must end within this, ms. */
  deadlineMs?: number;
  /** A client that stops reading: after the first chunk, nothing for this long. */
  pauseAfterFirstMs?: number;
  dispatcher?: Agent;
}

/** The `error` member of a JSON object holding one (an OpenAI error body or error event), else undefined. */
function errorOf(text: string): { code?: unknown } | undefined {
  let o: unknown;
  try {
    o = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (o === null || typeof o !== 'object' || !('error' in o)) return undefined;
  const e = (o as { error: unknown }).error;
  return e !== null && typeof e === 'object' ? (e as { code?: unknown }) : {};
}

/** POST /v1/chat/completions with `body`, which must ask for a stream: the suite judges streams only. */
export async function send(base: string, body: string, opts: SendOptions = {}): Promise<Ended> {
  if ((JSON.parse(body) as { stream?: unknown }).stream !== true) throw new Error('the fault suite\'s client sends stream requests only (stream: true)');
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), opts.deadlineMs ?? 30_000);
  let status = 0;
  try {
    const res = await request(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...opts.headers },
      body,
      signal: ac.signal,
      dispatcher: opts.dispatcher,
      headersTimeout: 0,
      bodyTimeout: 0,
    });
    status = res.statusCode;
    const contentType = String(res.headers['content-type'] ?? '');
    const sse = contentType.startsWith('text/event-stream');
    let done = false;
    let errorEvent = false;
    let text = '';
    const events = createSseEvents(({ data }) => {
      if (data === '[DONE]') done = true;
      else if (errorOf(data) !== undefined) errorEvent = true;
    });
    try {
      let first = true;
      for await (const chunk of res.body) {
        if (first && opts.pauseAfterFirstMs) await new Promise((r) => setTimeout(r, opts.pauseAfterFirstMs));
        first = false;
        if (sse) events.push(chunk as Buffer);
        else if (text.length < 1 << 20) text += (chunk as Buffer).toString();
      }
    } catch (e) {
      if (ac.signal.aborted) return { ending: 'silent', status, detail: 'no end within the deadline' };
      // The body was cut short, and the client's HTTP library says so.
      if (!sse) return { ending: 'explicit', status, detail: `body cut: ${(e as Error).message}` };
      if (errorEvent) return { ending: 'explicit', status, detail: 'error event' };
      return { ending: 'silent', status, detail: `stream cut without an error event: ${(e as Error).message}` };
    }
    if (status >= 400) {
      const err = sse ? undefined : errorOf(text);
      if (err === undefined) return { ending: 'silent', status, detail: `HTTP ${status} without an error body` };
      return { ending: 'explicit', status, detail: typeof err.code === 'string' || typeof err.code === 'number' ? String(err.code) : String(status) };
    }
    if (!sse) return { ending: 'silent', status, detail: `HTTP ${status} ${contentType || 'without a content type'} where an event stream was asked for` };
    if (errorEvent) return { ending: 'explicit', status, detail: 'error event' };
    if (!done) return { ending: 'silent', status, detail: 'stream ended without [DONE] or an error event' };
    if (status !== 200) return { ending: 'silent', status, detail: `an event stream with HTTP ${status}` };
    return { ending: 'completed', status, detail: '' };
  } catch (e) {
    if (ac.signal.aborted) return { ending: 'silent', status, detail: 'no answer within the deadline' };
    return { ending: 'silent', status, detail: `no answer: ${(e as Error).message}` };
  } finally {
    clearTimeout(timer);
  }
}

export interface Tally {
  sent: number;
  completed: number;
  explicit: number;
  silent: number;
  /** A few details of the non-completed ones, for the report. */
  notes: string[];
}

export function tally(results: readonly Ended[]): Tally {
  const t: Tally = { sent: results.length, completed: 0, explicit: 0, silent: 0, notes: [] };
  const seen = new Set<string>();
  for (const r of results) {
    t[r.ending]++;
    const note = `${r.ending}: ${r.status} ${r.detail}`;
    if (r.ending !== 'completed' && !seen.has(note) && t.notes.length < 4) {
      seen.add(note);
      t.notes.push(note);
    }
  }
  return t;
}
