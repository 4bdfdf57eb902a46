// The fault suite's client: sends one request and says how it ended, from the client's side.
//   completed — the whole answer (an event stream ending in [DONE], or a complete JSON body);
//   explicit  — an error the client can act on: an HTTP error status with an OpenAI error body,
//               an `error` event ending a stream, or a body cut short that the client's HTTP
//               library reports as such;
//   silent    — anything else: no answer at all, an event stream that just stops without [DONE]
//               or an error event (an OpenAI SDK returns that as a complete answer), or no end
//               within the deadline.

import { Agent, request } from 'undici';
import { createSseEvents } from '../../src/stream/sse-events.js';

export type Ending = 'completed' | 'explicit' | 'silent';

export interface Ended {
  ending: Ending;
  status: number;
  detail: string;
}

export interface SendOptions {
  path?: string;
  headers?: Record<string, string>;
  /** The whole exchange must end within this, ms. */
  deadlineMs?: number;
  /** Read the body slowly: pause this long after every chunk. */
  readDelayMs?: number;
  /** A client that stops reading: after the first chunk, nothing for this long. */
  pauseAfterFirstMs?: number;
  dispatcher?: Agent;
}

export async function send(base: string, body: string, opts: SendOptions = {}): Promise<Ended> {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), opts.deadlineMs ?? 30_000);
  let status = 0;
  try {
    const res = await request(`${base}${opts.path ?? '/v1/chat/completions'}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...opts.headers },
      body,
      signal: ac.signal,
      dispatcher: opts.dispatcher,
      headersTimeout: 0,
      bodyTimeout: 0,
    });
    status = res.statusCode;
    const sse = String(res.headers['content-type'] ?? '').startsWith('text/event-stream');
    let done = false;
    let errorEvent = false;
    let text = '';
    const events = createSseEvents(({ data }) => {
      if (data === '[DONE]') done = true;
      else if (data.startsWith('{"error"')) errorEvent = true;
    });
    try {
      let first = true;
      for await (const chunk of res.body) {
        if (first && opts.pauseAfterFirstMs) await new Promise((r) => setTimeout(r, opts.pauseAfterFirstMs));
        first = false;
        if (sse) events.push(chunk as Buffer);
        else if (text.length < 1 << 20) text += (chunk as Buffer).toString();
        if (opts.readDelayMs) await new Promise((r) => setTimeout(r, opts.readDelayMs));
      }
    } catch (e) {
      if (ac.signal.aborted) return { ending: 'silent', status, detail: 'no end within the deadline' };
      // The body was cut short, and the client's HTTP library says so.
      if (!sse) return { ending: 'explicit', status, detail: `body cut: ${(e as Error).message}` };
      if (errorEvent) return { ending: 'explicit', status, detail: 'error event' };
      return { ending: 'silent', status, detail: `stream cut without an error event: ${(e as Error).message}` };
    }
    if (status >= 400) {
      return /"error":\{"message"/.test(text) ? { ending: 'explicit', status, detail: /"code":"([^"]+)"/.exec(text)?.[1] ?? String(status) } : { ending: 'silent', status, detail: `HTTP ${status} without an error body` };
    }
    if (sse) {
      if (errorEvent) return { ending: 'explicit', status, detail: 'error event' };
      return done ? { ending: 'completed', status, detail: '' } : { ending: 'silent', status, detail: 'stream ended without [DONE] or an error event' };
    }
    try {
      JSON.parse(text);
      return { ending: 'completed', status, detail: '' };
    } catch {
      return { ending: 'silent', status, detail: 'JSON body that does not parse' };
    }
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
