/**
 * A passive reader of the response bytes on their way to the client. It never changes or holds a
 * byte; it scans with Buffer.indexOf (no JSON.parse per chunk) for:
 *  - the first generated token: a non-empty `content`/`text`/`reasoning_content` string or a
 *    `tool_calls` entry (the role-only first chunk `"content":""` does not count);
 *  - `data: [DONE]`;
 *  - the usage object (prompt, completion and cached tokens), parsed once from a small capture.
 */
export interface Tap {
  /** Scans one chunk; true when this chunk carries the first token. */
  scan(chunk: Buffer): boolean;
  /** Call when the body ended: parses a usage capture that had no event terminator. */
  end(): void;
  readonly firstToken: boolean;
  readonly done: boolean;
  readonly usage: Usage | null;
}

export interface Usage {
  promptTokens: number | null;
  completionTokens: number | null;
  cachedTokens: number | null;
}

const TOKEN_KEYS = ['"content":', '"text":', '"tool_calls":'].map((k) => Buffer.from(k, 'latin1'));
const USAGE = Buffer.from('"usage":', 'latin1');
const DONE = Buffer.from('[DONE]', 'latin1');
const MAX_USAGE_CAPTURE = 4096;
// Longest marker plus whitespace and the byte after it: what a chunk boundary can split.
const CARRY = 24;

const SPACE = 0x20, TAB = 0x09, QUOTE = 0x22, LBRACKET = 0x5b, LBRACE = 0x7b;

function skipSpace(b: Buffer, i: number): number {
  while (i < b.length && (b[i] === SPACE || b[i] === TAB)) i++;
  return i;
}

/** True when `b` holds a token marker whose value is non-empty (may need bytes past the end: then false). */
function hasToken(b: Buffer): boolean {
  for (const key of TOKEN_KEYS) {
    let from = 0;
    for (;;) {
      const at = b.indexOf(key, from);
      if (at < 0) break;
      const v = skipSpace(b, at + key.length);
      from = at + 1;
      if (v + 1 >= b.length) continue;
      if (b[v] === QUOTE && b[v + 1] !== QUOTE) return true;
      if (b[v] === LBRACKET && skipSpace(b, v + 1) < b.length && b[skipSpace(b, v + 1)] === LBRACE) return true;
    }
  }
  return false;
}

function num(text: string, key: string): number | null {
  const m = new RegExp(`"${key}":\\s*(\\d+)`).exec(text);
  return m ? Number(m[1]) : null;
}

function parseUsage(text: string): Usage {
  return { promptTokens: num(text, 'prompt_tokens'), completionTokens: num(text, 'completion_tokens'), cachedTokens: num(text, 'cached_tokens') };
}

/**
 * @param firstByteIsToken for non-streaming bodies: the first byte is the first thing the
 *   client can use, so it is the "first token".
 */
export function createTap(firstByteIsToken: boolean): Tap {
  let firstToken = false;
  let done = false;
  let usage: Usage | null = null;
  let capture: string | null = null;
  let carry: Buffer | null = null;

  // The last bytes of the previous chunk, so a marker split across two reads is still found.
  let tail = '';

  function startCapture(chunk: Buffer, seam: () => string): void {
    const at = chunk.indexOf(USAGE);
    if (at >= 0) {
      const v = skipSpace(chunk, at + USAGE.length);
      if (v < chunk.length && chunk[v] !== LBRACE) return; // "usage":null
      capture = chunk.toString('latin1', at, Math.min(chunk.length, at + MAX_USAGE_CAPTURE));
      return;
    }
    const joined = seam();
    const s = joined.indexOf('"usage":');
    if (s < 0) return;
    const rest = joined.slice(s + 8).trimStart();
    if (rest.length > 0 && rest[0] !== '{') return;
    capture = joined.slice(s) + chunk.toString('latin1', Math.min(chunk.length, CARRY), Math.min(chunk.length, MAX_USAGE_CAPTURE));
  }

  function feedUsage(chunk: Buffer, seam: () => string) {
    if (capture === null) startCapture(chunk, seam);
    else if (capture.length < MAX_USAGE_CAPTURE) {
      capture += chunk.toString('latin1', 0, Math.min(chunk.length, MAX_USAGE_CAPTURE - capture.length));
    }
    // An SSE event ends at a blank line; a JSON body ends at end().
    if (capture !== null && (capture.includes('\n\n') || capture.length >= MAX_USAGE_CAPTURE)) {
      usage = parseUsage(capture);
      capture = null;
    }
  }

  return {
    scan(chunk) {
      let isFirst = false;
      if (!firstToken) {
        if (firstByteIsToken) isFirst = chunk.length > 0;
        else {
          // Before the first token there are one or two small chunks: joining the carry is cheap.
          const view = carry ? Buffer.concat([carry, chunk]) : chunk;
          isFirst = hasToken(view);
          carry = isFirst ? null : Buffer.from(view.subarray(Math.max(0, view.length - CARRY)));
        }
        firstToken = isFirst;
      }
      // Nothing an OpenAI stream sends after [DONE] is of interest.
      if (done) return isFirst;
      // The previous chunk's end joined to this one's start, built only when a marker was not
      // found inside the chunk itself, and at most once per chunk.
      let joined: string | null = null;
      const seam = () => (joined ??= tail + chunk.toString('latin1', 0, Math.min(chunk.length, CARRY)));
      if (chunk.indexOf(DONE) >= 0 || seam().includes('[DONE]')) done = true;
      feedUsage(chunk, seam);
      tail = chunk.toString('latin1', Math.max(0, chunk.length - CARRY));
      return isFirst;
    },
    end() {
      if (capture !== null) usage = parseUsage(capture);
      capture = null;
    },
    get firstToken() { return firstToken; },
    get done() { return done; },
    get usage() { return usage; },
  };
}
