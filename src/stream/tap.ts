import { createSseEvents, type SseEvents } from './sse-events.js';
import { usageIn, type Usage } from './usage.js';

export type { Usage };

/**
 * A passive reader of the response bytes on their way to the client: it never changes or holds
 * back a byte. It notes the first generated token (what TTFT ends on), `data: [DONE]` and the
 * usage the replica reported.
 */
export interface Tap {
  /** Reads one chunk as it is relayed; true when this chunk carries the first token. */
  scan(chunk: Buffer): boolean;
  /** The body ended. */
  end(): void;
  readonly done: boolean;
  readonly usage: Usage | null;
}

// A token is a non-empty `content` or `text` string, or a `tool_calls` entry; the role-only first
// chunk (`"content":""`) is not one.
const TOKEN = /"(?:content|text)"\s*:\s*"[^"]|"tool_calls"\s*:\s*\[\s*\{/;

/**
 * An SSE stream: read event by event (stream/sse-events.ts), one character per byte since every
 * marker looked for is ASCII; JSON is never parsed here.
 */
function sseTap(): Tap {
  let first = false;
  let chunkHasFirst = false;
  let done = false;
  // The usage is in the last event before [DONE] (chat, completions) or in the last event of the
  // stream (response.completed): only that one is read for it, not every event.
  let last: string | null = null;
  const events: SseEvents = createSseEvents((e) => {
    if (done) return;
    const data = e.data;
    if (data === '[DONE]') { done = true; return; }
    if (!first && TOKEN.test(data)) { first = true; chunkHasFirst = true; }
    last = data;
  }, { bytes: 'latin1' });
  let usage: Usage | null = null;
  let ended = false;
  const settle = () => {
    if (ended) return;
    ended = true;
    if (last !== null) usage = usageIn(last);
    last = null;
  };
  return {
    scan(chunk) {
      if (done) return false;
      chunkHasFirst = false;
      events.push(chunk);
      if (done) settle();
      return chunkHasFirst;
    },
    end() {
      if (!done) events.end();
      settle();
    },
    get done() { return done; },
    get usage() { return usage; },
  };
}

/** How much of a JSON body's end is kept to read its usage from (vLLM puts usage last). */
const TAIL_BYTES = 4096;

/** A whole (JSON) body: its first byte is the first thing a client can use. */
function bodyTap(): Tap {
  let seen = false;
  let tail: Buffer | null = null;
  let usage: Usage | null = null;
  return {
    scan(chunk) {
      const isFirst = !seen && chunk.length > 0;
      if (isFirst) seen = true;
      if (chunk.length >= TAIL_BYTES) tail = chunk.subarray(chunk.length - TAIL_BYTES);
      else if (chunk.length > 0) {
        const joined = tail === null ? chunk : Buffer.concat([tail, chunk]);
        tail = joined.length > TAIL_BYTES ? joined.subarray(joined.length - TAIL_BYTES) : joined;
      }
      return isFirst;
    },
    end() {
      if (tail !== null) usage = usageIn(tail.toString('latin1'));
      tail = null;
    },
    get done() { return false; },
    get usage() { return usage; },
  };
}

export function createTap(sse: boolean): Tap {
  return sse ? sseTap() : bodyTap();
}
