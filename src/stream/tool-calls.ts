// Truncated tool calls: an answer that ran out of tokens (`finish_reason: "length"`) while a tool
// call's arguments were still being written. The client gets arguments that are not JSON (or,
// after a lenient repair, full of placeholders) and nothing says why, so the gateway says it.
// While the answer streams this costs one substring test per event of a request that offered
// tools; JSON is parsed only at the end, and only when the answer ended on its length.
//
// A request that forces a call (tool_choice "required" or a named function) and ends on its length
// has had its call cut whatever was sent: vLLM's tool parsers (hermes, on vLLM 0.32) hold a call
// back until it is complete, so a cut one arrives as no tool call at all, or as its opening
// markup in `content`.

/** How an answer is checked: the request offered tools, or forced a call. */
export type ToolWatchMode = 'offered' | 'forced';

/** What the end of an answer showed: whether a tool call was cut, and the response's id (vLLM's request id). */
export interface ToolCallEnd {
  readonly truncated: boolean;
  /** `chatcmpl-…`: the id vLLM logs the request under; null when not read. */
  readonly responseId: string | null;
}

export interface ToolCallWatch {
  /** One SSE event's data, as the tap reads it (latin1: every marker looked for is ASCII). */
  event(data: string): void;
  /** The stream ended: parses the tool-call events kept, when it ended on its length. */
  end(): ToolCallEnd;
}

const LENGTH = /"finish_reason"\s*:\s*"length"/;
const LEADING_ID = /^\s*\{\s*"id"\s*:\s*"([^"\\]{1,256})"/;
/** Tool-call events kept per stream: past it the arguments cannot be checked, and a cut is assumed. */
export const MAX_KEPT_CHARS = 1 << 20;

export const NOT_TRUNCATED: ToolCallEnd = Object.freeze({ truncated: false, responseId: null });

export const isObj = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null && !Array.isArray(x);

export function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/** Whether any of these arguments strings is not JSON (an empty string is a call cut before its first argument byte). */
const anyOpen = (args: Iterable<string>): boolean => {
  for (const a of args) if (!isJson(a)) return true;
  return false;
};

/** Latin1 text of UTF-8 bytes back to the text the replica meant (arguments may hold any character). */
export const utf8Of = (latin1: string): string => Buffer.from(latin1, 'latin1').toString('utf8');

/**
 * A streamed chat completion: the events that carry `tool_calls` are kept, and the length ending
 * noted. At the end their argument deltas are joined per choice and call index and each is checked.
 */
export function createToolCallWatch(mode: ToolWatchMode = 'offered'): ToolCallWatch {
  const kept: string[] = [];
  let keptChars = 0;
  let overflow = false;
  let length = false;
  let responseId: string | null = null;
  return {
    event(data) {
      if (data.includes('"tool_calls"')) {
        if (keptChars + data.length > MAX_KEPT_CHARS) overflow = true;
        else { kept.push(data); keptChars += data.length; }
      }
      if (data.includes('"finish_reason"') && LENGTH.test(data)) {
        length = true;
        responseId ??= LEADING_ID.exec(data)?.[1] ?? null;
      }
    },
    end() {
      if (!length) return NOT_TRUNCATED;
      if (mode === 'forced' || overflow) return { truncated: true, responseId };
      if (kept.length === 0) return NOT_TRUNCATED;
      const args = new Map<string, string>();
      for (const data of kept) {
        let chunk: unknown;
        try {
          chunk = JSON.parse(utf8Of(data));
        } catch {
          continue;
        }
        if (!isObj(chunk) || !Array.isArray(chunk.choices)) continue;
        for (const c of chunk.choices) {
          if (!isObj(c) || !isObj(c.delta) || !Array.isArray(c.delta.tool_calls)) continue;
          for (const t of c.delta.tool_calls) {
            if (!isObj(t)) continue;
            const key = `${String(c.index ?? 0)}:${String(t.index ?? 0)}`;
            const piece = isObj(t.function) && typeof t.function.arguments === 'string' ? t.function.arguments : '';
            args.set(key, (args.get(key) ?? '') + piece);
          }
        }
      }
      return { truncated: anyOpen(args.values()), responseId };
    },
  };
}

/**
 * A whole chat completion body (latin1 text of its bytes): a choice that ended on its length with
 * a tool call whose arguments are not JSON. Parsed only when the body says `"length"` at all.
 */
export function toolCallEndOfBody(latin1: string, mode: ToolWatchMode = 'offered'): ToolCallEnd {
  if ((mode === 'offered' && !latin1.includes('"tool_calls"')) || !LENGTH.test(latin1)) return NOT_TRUNCATED;
  let body: unknown;
  try {
    body = JSON.parse(utf8Of(latin1));
  } catch {
    return NOT_TRUNCATED;
  }
  if (!isObj(body) || !Array.isArray(body.choices)) return NOT_TRUNCATED;
  const responseId = typeof body.id === 'string' ? body.id.slice(0, 256) : null;
  for (const c of body.choices) {
    if (!isObj(c) || c.finish_reason !== 'length') continue;
    if (mode === 'forced') return { truncated: true, responseId };
    if (!isObj(c.message) || !Array.isArray(c.message.tool_calls)) continue;
    const args = c.message.tool_calls.map((t: unknown) => (isObj(t) && isObj(t.function) && typeof t.function.arguments === 'string' ? t.function.arguments : ''));
    if (anyOpen(args)) return { truncated: true, responseId };
  }
  return { truncated: false, responseId };
}

/** A whole body read chunk by chunk: the chunks are kept (not copied) up to a bound, read at its end. */
export interface BodyToolCallWatch {
  chunk(bytes: Buffer): void;
  end(): ToolCallEnd;
}

/** `ofBody`: how the whole body is read at its end (a chat completion's, by default). */
export function createBodyToolCallWatch(mode: ToolWatchMode = 'offered', ofBody: (latin1: string, mode: ToolWatchMode) => ToolCallEnd = toolCallEndOfBody): BodyToolCallWatch {
  let chunks: Buffer[] | null = [];
  let size = 0;
  return {
    chunk(bytes) {
      if (chunks === null) return;
      size += bytes.length;
      // Too large to check: left unchecked rather than held.
      if (size > MAX_KEPT_CHARS) chunks = null;
      else chunks.push(bytes);
    },
    end() {
      const c = chunks;
      chunks = null;
      return c === null || c.length === 0 ? NOT_TRUNCATED : ofBody(Buffer.concat(c).toString('latin1'), mode);
    },
  };
}
