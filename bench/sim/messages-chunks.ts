// Anthropic Messages bodies in vLLM's shapes (vllm/entrypoints/anthropic/): vLLM runs the request
// as a chat completion and converts its chunks, so the stream is named events, each
// `event: <type>` / `data: <json>` with the fields vLLM's pydantic models dump (exclude_unset, in
// their declared order):
//
//   message_start        with the first chunk: id (the chat completion's), content [], model,
//                        stop_reason null, stop_sequence null, usage {input_tokens, output_tokens 0}
//   content_block_start  when a text or tool_use block opens (index counts blocks)
//   content_block_delta  text_delta per text token, input_json_delta per argument fragment
//   content_block_stop   when the next block opens, or at the end
//   message_delta        stop_reason (end_turn, max_tokens, tool_use) and usage
//   message_stop         for the chat stream's [DONE]
//
// vLLM leaves `cache_read_input_tokens` unset in both the stream and the whole body (it is in the
// usage model, but its converter never fills it), so the simulator does too. The whole body is
// dumped with exclude_none: type and role appear, stop_sequence does not.

import type { Usage } from './chunks.js';
import type { TokenDelta } from './output.js';

export interface MessageIdentity {
  id: string;
  model: string;
}

const event = (type: string, json: string): string => `event: ${type}\ndata: ${json}\n\n`;

const STOP_REASON: Readonly<Record<string, string>> = { stop: 'end_turn', length: 'max_tokens', tool_calls: 'tool_use' };

export const stopReasonOf = (finish: string): string => STOP_REASON[finish] ?? 'end_turn';

export interface MessagesOutput {
  /** The stream's events for one generated token (message_start with the first). */
  token(d: TokenDelta, first: boolean, promptTokens: number): string;
  /** The closing events: the open block's stop, message_delta, message_stop. */
  finish(finish: string, u: Usage): string;
  /** The whole (non-streamed) message. */
  body(text: string, tool: { id: string; name: string; arguments: string } | null, finish: string, u: Usage): string;
}

export function createMessagesOutput(r: MessageIdentity): MessagesOutput {
  let index = 0;
  let open: 'text' | 'tool_use' | null = null;
  const stop = (): string => {
    if (open === null) return '';
    open = null;
    return event('content_block_stop', `{"type":"content_block_stop","index":${index++}}`);
  };
  const start = (kind: 'text' | 'tool_use', block: string): string => {
    const out = stop() + event('content_block_start', `{"type":"content_block_start","content_block":${block},"index":${index}}`);
    open = kind;
    return out;
  };
  const delta = (json: string): string => event('content_block_delta', `{"type":"content_block_delta","delta":${json},"index":${index}}`);
  return {
    token(d, first, promptTokens) {
      let out = '';
      if (first) {
        out += event('message_start', JSON.stringify({
          type: 'message_start',
          message: { id: r.id, content: [], model: r.model, stop_reason: null, stop_sequence: null, usage: { input_tokens: promptTokens, output_tokens: 0 } },
        }));
      }
      if (d.t === 'text' && d.text !== '') {
        if (open !== 'text') out += start('text', '{"type":"text","text":""}');
        out += delta(JSON.stringify({ type: 'text_delta', text: d.text }));
      } else if (d.t === 'tool-name') {
        out += start('tool_use', JSON.stringify({ type: 'tool_use', id: d.id, name: d.name, input: {} }));
      } else if (d.t === 'tool-args' && open === 'tool_use') {
        out += delta(JSON.stringify({ type: 'input_json_delta', partial_json: d.args }));
      }
      return out;
    },
    finish(finish, u) {
      return stop()
        + event('message_delta', JSON.stringify({ type: 'message_delta', delta: { stop_reason: stopReasonOf(finish) }, usage: { input_tokens: u.promptTokens, output_tokens: u.completionTokens } }))
        + event('message_stop', '{"type":"message_stop"}');
    },
    body(text, tool, finish, u) {
      const content: Record<string, unknown>[] = [];
      if (text !== '') content.push({ type: 'text', text });
      // vLLM json.loads the call's arguments: a call cut on its length fails there (a 500).
      if (tool !== null) content.push({ type: 'tool_use', id: tool.id, name: tool.name, input: JSON.parse(tool.arguments) as unknown });
      return JSON.stringify({
        id: r.id, type: 'message', role: 'assistant', content, model: r.model, stop_reason: stopReasonOf(finish),
        usage: { input_tokens: u.promptTokens, output_tokens: u.completionTokens },
      });
    },
  };
}
