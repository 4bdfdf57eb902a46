// One streamed chat-completions request, timed from just before it is handed to the connection to
// the arrival of the network chunk holding the first content chunk.

import type { Dispatcher } from 'undici';

import { createSseScanner } from './sse.js';

export interface TrialSample {
  ok: boolean;
  /** Send → first content chunk. Null when the trial failed. */
  ttftMs: number | null;
  /** Send → response headers; the gap to ttftMs is time the server streamed without content. */
  headersMs: number | null;
  /** Send → end of stream (or failure). */
  totalMs: number;
  status: number | null;
  promptTokens: number | null;
  cachedTokens: number | null;
  error: string | null;
}

export interface ChatRequest {
  path: string;
  headers: Record<string, string>;
  /** Pre-serialised so a repeated send carries byte-identical bodies. */
  body: Buffer;
  timeoutMs: number;
}

const ERROR_BODY_LIMIT = 64 * 1024;

/**
 * Never rejects for an HTTP-level or stream-level failure: those become a failed sample so the run
 * continues. It rethrows only transport errors, which the caller classifies (refused → fatal).
 */
export async function measureChat(client: Dispatcher, req: ChatRequest): Promise<TrialSample> {
  const signal = AbortSignal.timeout(req.timeoutMs);
  const start = process.hrtime.bigint();
  const since = (): number => Number(process.hrtime.bigint() - start) / 1e6;
  const fail = (error: string, status: number | null, headersMs: number | null): TrialSample => ({
    ok: false,
    ttftMs: null,
    headersMs,
    totalMs: since(),
    status,
    promptTokens: null,
    cachedTokens: null,
    error,
  });

  let res: Dispatcher.ResponseData;
  try {
    res = await client.request({
      method: 'POST',
      path: req.path,
      headers: { 'content-type': 'application/json', accept: 'text/event-stream', ...req.headers },
      body: req.body,
      signal,
    });
  } catch (err) {
    if (signal.aborted) return fail(`timed out after ${req.timeoutMs} ms waiting for response headers`, null, null);
    throw err;
  }
  const headersMs = since();

  if (res.statusCode < 200 || res.statusCode > 299) {
    const text = await readLimited(res.body).catch(() => '');
    return fail(`HTTP ${res.statusCode}: ${errorMessage(text)}`, res.statusCode, headersMs);
  }

  const scanner = createSseScanner();
  let ttftMs: number | null = null;
  try {
    await new Promise<void>((resolve, reject) => {
      res.body.on('data', (chunk: Buffer) => {
        // Stamp before scanning so JSON parsing is not billed to the server.
        const at = since();
        if (scanner.push(chunk)) ttftMs = at;
      });
      res.body.once('end', () => {
        if (scanner.end() && ttftMs === null) ttftMs = since();
        resolve();
      });
      res.body.once('error', reject);
    });
  } catch (err) {
    const why = signal.aborted ? `timed out after ${req.timeoutMs} ms` : `stream failed: ${describe(err)}`;
    return fail(ttftMs === null ? why : `${why} (after first content)`, res.statusCode, headersMs);
  }

  const s = scanner.state;
  if (s.error !== null) return fail(`error event in stream: ${s.error}`, res.statusCode, headersMs);
  if (ttftMs === null) {
    return fail(`stream ended without a content chunk (${s.events} data events${s.done ? ', [DONE] seen' : ''})`, res.statusCode, headersMs);
  }
  return {
    ok: true,
    ttftMs,
    headersMs,
    totalMs: since(),
    status: res.statusCode,
    promptTokens: s.promptTokens,
    cachedTokens: s.cachedTokens,
    error: null,
  };
}

async function readLimited(body: Dispatcher.ResponseData['body']): Promise<string> {
  const parts: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    const b = chunk as Buffer;
    if (size < ERROR_BODY_LIMIT) parts.push(b);
    size += b.length;
  }
  return Buffer.concat(parts).toString('utf8').slice(0, ERROR_BODY_LIMIT);
}

/** The message out of an OpenAI-shaped (or FastAPI `detail`) error body, else the raw text. */
export function errorMessage(text: string): string {
  const trimmed = text.trim();
  if (!trimmed) return '(empty body)';
  try {
    const obj = JSON.parse(trimmed) as { error?: { message?: unknown } | string; message?: unknown; detail?: unknown };
    if (typeof obj.error === 'string') return obj.error;
    if (typeof obj.error?.message === 'string') return obj.error.message;
    if (typeof obj.message === 'string') return obj.message;
    if (typeof obj.detail === 'string') return obj.detail;
  } catch {
    // not JSON; fall through to the raw text
  }
  return trimmed.length > 300 ? `${trimmed.slice(0, 300)}…` : trimmed;
}

export function describe(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    return typeof code === 'string' ? `${err.message} [${code}]` : err.message;
  }
  return String(err);
}
