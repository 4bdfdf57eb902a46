// Incremental scanner for an OpenAI chat-completions SSE stream.
//
// It answers three questions as bytes arrive: has the first CONTENT chunk been seen (text or a tool
// call — the role-only opener `{"role":"assistant","content":""}` does not count), what usage did
// the server report, and did the stream carry an error event. Lines are JSON-parsed only until the
// first content is found; after that only lines that can hold usage or an error are parsed, so the
// scanner stays cheap on long streams.

const NL = 0x0a;
const DATA = Buffer.from('data:');
const USAGE_KEY = Buffer.from('"prompt_tokens"');
const ERROR_KEY = Buffer.from('"error"');

export interface SseScanState {
  contentSeen: boolean;
  done: boolean;
  promptTokens: number | null;
  cachedTokens: number | null;
  error: string | null;
  /** Non-empty data lines seen, for diagnostics when no content ever arrives. */
  events: number;
}

export interface SseScanner {
  readonly state: SseScanState;
  /** Feed one network chunk; returns true if this chunk held the first content chunk. */
  push(chunk: Buffer): boolean;
  /** Flush a final line that lacked its newline; returns true like push(). */
  end(): boolean;
}

interface ChunkShape {
  choices?: Array<{ delta?: { content?: unknown; tool_calls?: unknown } }>;
  usage?: { prompt_tokens?: unknown; prompt_tokens_details?: { cached_tokens?: unknown } | null } | null;
  error?: unknown;
}

export function createSseScanner(): SseScanner {
  const state: SseScanState = {
    contentSeen: false,
    done: false,
    promptTokens: null,
    cachedTokens: null,
    error: null,
    events: 0,
  };
  let rest: Buffer | null = null;

  function onLine(buf: Buffer, start: number, end: number): boolean {
    if (end > start && buf[end - 1] === 0x0d) end--; // CRLF
    if (end - start < DATA.length || buf.compare(DATA, 0, DATA.length, start, start + DATA.length) !== 0) {
      return false; // comments, event:, id:, blank separators
    }
    let p = start + DATA.length;
    if (buf[p] === 0x20) p++;
    if (p >= end) return false;
    const line = buf.subarray(p, end);
    state.events++;
    if (line.length === 6 && line.toString('latin1') === '[DONE]') {
      state.done = true;
      return false;
    }
    const mustParse = !state.contentSeen || line.includes(USAGE_KEY) || line.includes(ERROR_KEY);
    if (!mustParse) return false;
    let obj: ChunkShape;
    try {
      obj = JSON.parse(line.toString('utf8')) as ChunkShape;
    } catch {
      return false; // a stray non-JSON line is not content; keep scanning
    }
    if (obj === null || typeof obj !== 'object') return false;
    if (obj.error !== undefined && obj.error !== null) {
      state.error ??= errorText(obj.error);
      return false;
    }
    const usage = obj.usage;
    if (usage && typeof usage.prompt_tokens === 'number') {
      state.promptTokens = usage.prompt_tokens;
      const cached = usage.prompt_tokens_details?.cached_tokens;
      state.cachedTokens = typeof cached === 'number' ? cached : null;
    }
    if (!state.contentSeen && isContent(obj)) {
      state.contentSeen = true;
      return true;
    }
    return false;
  }

  function scan(buf: Buffer): boolean {
    let first = false;
    let start = 0;
    for (let i = buf.indexOf(NL, start); i !== -1; i = buf.indexOf(NL, start)) {
      if (onLine(buf, start, i)) first = true;
      start = i + 1;
    }
    rest = start < buf.length ? buf.subarray(start) : null;
    return first;
  }

  return {
    state,
    push(chunk) {
      return scan(rest ? Buffer.concat([rest, chunk]) : chunk);
    },
    end() {
      if (!rest) return false;
      const buf = rest;
      rest = null;
      return onLine(buf, 0, buf.length);
    },
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
