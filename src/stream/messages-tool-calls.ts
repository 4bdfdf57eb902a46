// The tool-call guard's check for Anthropic Messages answers: one that stopped on its token limit
// (`stop_reason: "max_tokens"`) while a `tool_use` block was the one being written has had that
// call cut, and its input is not what the model meant. Like the chat check, it costs a substring
// test per event while the answer streams; JSON is parsed only at the end, only when the answer
// stopped on its limit.

import { isJson, isObj, MAX_KEPT_CHARS, NOT_TRUNCATED, utf8Of, type ToolCallEnd, type ToolWatchMode } from './tool-calls.js';

/** One Messages stream's events, by their SSE name (the tap reads the data as latin1). */
export interface MessagesToolWatch {
  event(type: string, data: string): void;
  end(): ToolCallEnd;
}

const MAX_TOKENS = /"stop_reason"\s*:\s*"max_tokens"/;
const TOOL_USE = /"type"\s*:\s*"tool_use"/;
/** message_start's message leads with its id (vLLM's request id, as in its logs). */
const MESSAGE_ID = /"message"\s*:\s*\{\s*"id"\s*:\s*"([^"\\]{1,256})"/;

/**
 * A streamed answer: the input_json_delta events of the latest content block, when it is a
 * tool_use block, are kept; at the end, if the answer stopped on max_tokens, their partial_json is
 * joined and checked. A forced call (tool_choice `any` or `tool`) stopped on its limit is cut
 * whatever was sent, as for chat.
 */
export function createMessagesToolWatch(mode: ToolWatchMode = 'offered'): MessagesToolWatch {
  let toolBlock = false;
  let kept: string[] = [];
  let keptChars = 0;
  let overflow = false;
  let maxTokens = false;
  let responseId: string | null = null;
  return {
    event(type, data) {
      switch (type) {
        case 'message_start':
          responseId ??= MESSAGE_ID.exec(data)?.[1] ?? null;
          return;
        case 'content_block_start':
          toolBlock = TOOL_USE.test(data);
          kept = [];
          keptChars = 0;
          overflow = false;
          return;
        case 'content_block_delta':
          if (!toolBlock || !data.includes('input_json_delta')) return;
          if (keptChars + data.length > MAX_KEPT_CHARS) overflow = true;
          else { kept.push(data); keptChars += data.length; }
          return;
        case 'message_delta':
          if (MAX_TOKENS.test(data)) maxTokens = true;
          return;
        default:
      }
    },
    end() {
      if (!maxTokens) return NOT_TRUNCATED;
      if (mode === 'forced' || overflow) return { truncated: true, responseId };
      if (!toolBlock) return { truncated: false, responseId };
      let input = '';
      for (const data of kept) {
        let e: unknown;
        try {
          e = JSON.parse(utf8Of(data));
        } catch {
          continue;
        }
        if (isObj(e) && isObj(e.delta) && typeof e.delta.partial_json === 'string') input += e.delta.partial_json;
      }
      return { truncated: !isJson(input), responseId };
    },
  };
}

/**
 * A whole Messages body (latin1 text of its bytes) that stopped on max_tokens with a tool_use block
 * last: that call was being written when the limit hit (its input is whatever the replica made of
 * the cut arguments). Parsed only when the body says `"max_tokens"` as its stop reason at all.
 */
export function toolCallEndOfMessagesBody(latin1: string, mode: ToolWatchMode = 'offered'): ToolCallEnd {
  if (!MAX_TOKENS.test(latin1)) return NOT_TRUNCATED;
  let body: unknown;
  try {
    body = JSON.parse(utf8Of(latin1));
  } catch {
    return NOT_TRUNCATED;
  }
  if (!isObj(body) || body.stop_reason !== 'max_tokens') return NOT_TRUNCATED;
  const responseId = typeof body.id === 'string' ? body.id.slice(0, 256) : null;
  if (mode === 'forced') return { truncated: true, responseId };
  const content = Array.isArray(body.content) ? body.content : [];
  const last: unknown = content[content.length - 1];
  return { truncated: isObj(last) && last.type === 'tool_use', responseId };
}
