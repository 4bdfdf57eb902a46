// What `warmroute probe` reads of an OpenAI chat-completions stream, event by event (the gateway's
// own SSE reader, stream/sse-events.ts): has the first CONTENT chunk been seen (text or a tool
// call — the role-only opener `{"role":"assistant","content":""}` does not count), what usage did
// the server report, and did the stream carry an error event. Events are JSON-parsed only until
// the first content is found; after that only those that can hold usage or an error.

import { createSseEvents } from '../stream/sse-events.js';

export interface SseScanState {
  contentSeen: boolean;
  done: boolean;
  promptTokens: number | null;
  cachedTokens: number | null;
  error: string | null;
  /** Non-empty data events seen, for diagnostics when no content ever arrives. */
  events: number;
}

export interface SseScanner {
  readonly state: SseScanState;
  /** Feed one network chunk; returns true if this chunk held the first content chunk. */
  push(chunk: Buffer): boolean;
  /** The stream ended (an event left without its blank line is dropped); returns true like push(). */
  end(): boolean;
}

interface ChunkShape {
  choices?: Array<{ delta?: { content?: unknown; tool_calls?: unknown } }>;
  usage?: { prompt_tokens?: unknown; prompt_tokens_details?: { cached_tokens?: unknown } | null } | null;
  error?: unknown;
}

export function createSseScanner(): SseScanner {
  const state: SseScanState = { contentSeen: false, done: false, promptTokens: null, cachedTokens: null, error: null, events: 0 };
  let first = false;
  const events = createSseEvents(({ data }) => {
    if (data === '') return;
    state.events++;
    if (data === '[DONE]') {
      state.done = true;
      return;
    }
    const mustParse = !state.contentSeen || data.includes('"prompt_tokens"') || data.includes('"error"');
    if (!mustParse) return;
    let obj: ChunkShape;
    try {
      obj = JSON.parse(data) as ChunkShape;
    } catch {
      return; // a stray non-JSON event is not content; keep reading
    }
    if (obj === null || typeof obj !== 'object') return;
    if (obj.error !== undefined && obj.error !== null) {
      state.error ??= errorText(obj.error);
      return;
    }
    const usage = obj.usage;
    if (usage && typeof usage.prompt_tokens === 'number') {
      state.promptTokens = usage.prompt_tokens;
      const cached = usage.prompt_tokens_details?.cached_tokens;
      state.cachedTokens = typeof cached === 'number' ? cached : null;
    }
    if (!state.contentSeen && isContent(obj)) {
      state.contentSeen = true;
      first = true;
    }
  });
  const after = (feed: () => void) => {
    first = false;
    feed();
    return first;
  };
  return {
    state,
    push: (chunk) => after(() => events.push(chunk)),
    end: () => after(() => events.end()),
  };
}

function isContent(obj: ChunkShape): boolean {
  const delta = Array.isArray(obj.choices) ? obj.choices[0]?.delta : undefined;
  if (!delta) return false;
  if (typeof delta.content === 'string' && delta.content.length > 0) return true;
  return Array.isArray(delta.tool_calls) && delta.tool_calls.length > 0;
}

function errorText(err: unknown): string {
  if (typeof err === 'string') return err;
  if (err && typeof err === 'object' && 'message' in err && typeof err.message === 'string') return err.message;
  return JSON.stringify(err);
}
