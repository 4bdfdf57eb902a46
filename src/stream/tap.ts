import { createMessagesToolWatch, toolCallEndOfMessagesBody, type MessagesToolWatch } from './messages-tool-calls.js';
import { createSseEvents, type SseEvent, type SseEvents } from './sse-events.js';
import { createBodyToolCallWatch, createToolCallWatch, type ToolCallEnd, type ToolCallWatch, type ToolWatchMode } from './tool-calls.js';
import { usageIn, type Usage } from './usage.js';

export type { Usage };

/** Which API's answer is read: chat and completions, the Responses API, or Anthropic Messages. */
export type TapApi = 'chat' | 'responses' | 'messages';

/** What a stream's first token was: text, a reasoning model's thinking, or a tool call. */
export type FirstToken = 'content' | 'reasoning' | 'tool_call';

/**
 * A passive reader of the response bytes on their way to the client: it never changes or holds
 * back a byte. It notes the first generated token (what TTFT ends on), the end of the stream
 * (`data: [DONE]`, a Responses API stream's final event, a Messages stream's message_stop), the
 * usage the replica reported, and
 * for the Responses API the id of the response relayed (its replica stores it).
 */
export interface Tap {
  /**
   * Reads one chunk as it is relayed; true when this chunk carries the first token. A whole
   * (non-streamed) body has none: its first byte comes after the whole generation.
   */
  scan(chunk: Buffer): boolean;
  /** The body ended. */
  end(): void;
  readonly done: boolean;
  readonly usage: Usage | null;
  /** Responses API: the id of the response relayed (null when not one, or not found). */
  readonly responseId: string | null;
  /** What the first token was; null before it (and always for a whole body). */
  readonly firstToken: FirstToken | null;
  /** The request offered tools: whether the answer ended with a tool call cut (stream/tool-calls.ts); null otherwise, and before the end. */
  readonly toolCall: ToolCallEnd | null;
}

// A token is a non-empty `content` or `text` string, a reasoning model's non-empty
// `reasoning_content` (or `reasoning`, vLLM's newer name) string, or a `tool_calls` entry; the
// role-only first chunk (`"content":""`) is not one. The group that matched says which.
const TOKEN = /"(?:(content|text)|(reasoning_content|reasoning))"\s*:\s*"[^"]|("tool_calls"\s*:\s*\[\s*\{)/;
const kindOf = (m: RegExpExecArray): FirstToken => (m[1] !== undefined ? 'content' : m[2] !== undefined ? 'reasoning' : 'tool_call');

// Responses API events. The event's type is its SSE `event:` name (vLLM and OpenAI send one);
// without it, the data's `"type":"response.…"` (nested items' types never start with `response.`).
const EVENT_TYPE = /"type"\s*:\s*"(response\.[\w.]+)"/;
const NON_EMPTY_DELTA = /"delta"\s*:\s*"[^"]/;
const FUNCTION_CALL_ITEM = /"type"\s*:\s*"function_call"/;
/** response.created's object leads with its id (vLLM and OpenAI both dump `id` first). */
const CREATED_ID = /"response"\s*:\s*\{[^]*?"id"\s*:\s*"([^"\\]{1,256})"/;

// Anthropic Messages events: the type is the SSE event name (vLLM and Anthropic send one), else
// the data's leading `"type"`. A content delta is text, thinking or a tool call's input.
const MESSAGES_TYPE = /^\s*\{\s*"type"\s*:\s*"([a-z_]+)"/;
const DELTA_TYPE = /"type"\s*:\s*"(text|thinking|input_json)_delta"/;
const NON_EMPTY_TEXT = /"text"\s*:\s*"[^"]/;
const NON_EMPTY_THINKING = /"thinking"\s*:\s*"[^"]/;

/** What a content_block_delta's data carries as its first output; null when nothing (an empty text delta). */
function messagesOutput(data: string): FirstToken | null {
  const m = DELTA_TYPE.exec(data);
  if (m === null) return null;
  if (m[1] === 'input_json') return 'tool_call';
  if (m[1] === 'text') return NON_EMPTY_TEXT.test(data) ? 'content' : null;
  return NON_EMPTY_THINKING.test(data) ? 'reasoning' : null;
}

/** Whether a Responses event carries the first output: text, reasoning, a function call's item or its arguments. */
function isFirstOutput(type: string, data: string): boolean {
  switch (type) {
    case 'response.output_text.delta': return NON_EMPTY_DELTA.test(data);
    case 'response.reasoning_text.delta': return NON_EMPTY_DELTA.test(data);
    case 'response.reasoning_summary_text.delta': return NON_EMPTY_DELTA.test(data);
    case 'response.function_call_arguments.delta': return true;
    case 'response.output_item.added': return FUNCTION_CALL_ITEM.test(data);
    default: return false;
  }
}

/**
 * An SSE stream: read event by event (stream/sse-events.ts), one character per byte since every
 * marker looked for is ASCII; JSON is never parsed here. One object per stream, its methods on
 * the prototype: it lives as long as the stream, so whatever it holds is copied by every young
 * collection the stream outlives (as closures it was ~1.8 KB of them per stream: docs/design-notes.md).
 */
class SseTap implements Tap {
  private readonly toolWatch: ToolCallWatch | null;
  private readonly messagesToolWatch: MessagesToolWatch | null;
  private readonly events: SseEvents;
  private first = false;
  firstToken: FirstToken | null = null;
  private chunkHasFirst = false;
  done = false;
  responseId: string | null = null;
  // The usage is in the last event before [DONE] (chat, completions) or in the last event of the
  // stream (response.completed): only that one is read for it, not every event.
  private last: string | null = null;
  usage: Usage | null = null;
  toolCall: ToolCallEnd | null = null;
  private ended = false;

  constructor(private readonly api: TapApi, tools: ToolWatchMode | null) {
    this.toolWatch = tools !== null && api === 'chat' ? createToolCallWatch(tools) : null;
    this.messagesToolWatch = tools !== null && api === 'messages' ? createMessagesToolWatch(tools) : null;
    this.events = createSseEvents((e) => this.event(e), { bytes: 'latin1' });
  }

  private event(e: SseEvent): void {
    if (this.done) return;
    if (this.api === 'responses') this.responsesEvent(e.event, e.data);
    else if (this.api === 'messages') this.messagesEvent(e.event, e.data);
    else this.chatEvent(e.data);
  }

  private messagesEvent(name: string | undefined, data: string): void {
    const type = name !== undefined && name !== '' ? name : MESSAGES_TYPE.exec(data)?.[1] ?? '';
    this.messagesToolWatch?.event(type, data);
    if (type === 'content_block_delta') {
      if (this.first) return;
      const kind = messagesOutput(data);
      if (kind !== null) { this.first = true; this.chunkHasFirst = true; this.firstToken = kind; }
    } else if (type === 'message_delta') {
      // The stop reason and the final usage; message_stop follows.
      this.last = data;
    } else if (type === 'message_stop') {
      this.done = true;
    }
  }

  private chatEvent(data: string): void {
    if (data === '[DONE]') { this.done = true; return; }
    this.toolWatch?.event(data);
    if (!this.first) {
      const m = TOKEN.exec(data);
      if (m !== null) { this.first = true; this.chunkHasFirst = true; this.firstToken = kindOf(m); }
    }
    this.last = data;
  }

  private responsesEvent(name: string | undefined, data: string): void {
    const type = name !== undefined && name !== '' ? name : EVENT_TYPE.exec(data)?.[1] ?? '';
    if (type === 'response.created') {
      this.responseId = CREATED_ID.exec(data)?.[1] ?? null;
    } else if (type === 'response.completed' || type === 'response.incomplete' || type === 'response.failed') {
      // The final object, with the usage; nothing after it is part of the response.
      this.last = data;
      this.done = true;
    } else if (!this.first && isFirstOutput(type, data)) {
      this.first = true;
      this.chunkHasFirst = true;
      this.firstToken = type === 'response.output_text.delta' ? 'content' : type.startsWith('response.reasoning') ? 'reasoning' : 'tool_call';
    }
  }

  private settle(): void {
    if (this.ended) return;
    this.ended = true;
    if (this.last !== null) this.usage = usageIn(this.last);
    this.last = null;
    this.toolCall = this.toolWatch?.end() ?? this.messagesToolWatch?.end() ?? null;
  }

  scan(chunk: Buffer): boolean {
    if (this.done) return false;
    this.chunkHasFirst = false;
    this.events.push(chunk);
    if (this.done) this.settle();
    return this.chunkHasFirst;
  }

  end(): void {
    if (!this.done) this.events.end();
    this.settle();
  }
}

/** How much of a JSON body's end is kept to read its usage from (vLLM puts usage last). */
const TAIL_BYTES = 4096;
/** How much of a JSON body's start is kept to read a Responses API object's id from. */
const HEAD_BYTES = 512;
/** A response object leads with its id (`{"id":"resp_…"`). */
const BODY_ID = /^\s*\{\s*"id"\s*:\s*"([^"\\]{1,256})"/;

/** A whole (JSON) body: read for its usage and id only. */
function bodyTap(api: TapApi, tools: ToolWatchMode | null): Tap {
  const responses = api === 'responses';
  const toolWatch = tools === null || responses ? null : api === 'messages' ? createBodyToolCallWatch(tools, toolCallEndOfMessagesBody) : createBodyToolCallWatch(tools);
  let toolCall: ToolCallEnd | null = null;
  let tail: Buffer | null = null;
  let head: Buffer | null = null;
  let usage: Usage | null = null;
  let responseId: string | null = null;
  return {
    scan(chunk) {
      toolWatch?.chunk(chunk);
      if (responses && (head === null || head.length < HEAD_BYTES)) {
        head = head === null ? chunk.subarray(0, HEAD_BYTES) : Buffer.concat([head, chunk.subarray(0, HEAD_BYTES - head.length)]);
      }
      if (chunk.length >= TAIL_BYTES) tail = chunk.subarray(chunk.length - TAIL_BYTES);
      else if (chunk.length > 0) {
        const joined = tail === null ? chunk : Buffer.concat([tail, chunk]);
        tail = joined.length > TAIL_BYTES ? joined.subarray(joined.length - TAIL_BYTES) : joined;
      }
      return false;
    },
    end() {
      if (tail !== null) usage = usageIn(tail.toString('latin1'));
      if (head !== null) responseId = BODY_ID.exec(head.toString('latin1'))?.[1] ?? null;
      tail = null;
      head = null;
      toolCall = toolWatch?.end() ?? null;
    },
    get done() { return false; },
    get usage() { return usage; },
    get responseId() { return responseId; },
    firstToken: null,
    get toolCall() { return toolCall; },
  };
}

/**
 * `api`: the API the body answers (the Responses API's and Anthropic Messages' events and objects
 * have their own shapes). `tools`: the request offered tools or forced a call (a chat or Messages
 * answer is then checked for a cut tool call).
 */
export function createTap(sse: boolean, api: TapApi = 'chat', tools: ToolWatchMode | null = null): Tap {
  return sse ? new SseTap(api, tools) : bodyTap(api, tools);
}
