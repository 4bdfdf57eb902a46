// Responses API bodies in vLLM's shapes (serving_responses.py, the simple non-Harmony path): the
// response object, and the event stream — `event: <type>` / `data: <json>` pairs, each event's
// fields in the order vLLM's pydantic models dump them, a sequence_number counting from 0:
//
//   response.created, response.in_progress                          as soon as the stream opens
//   response.output_item.added + response.content_part.added       with the first text token
//   response.output_text.delta ...                                  one per token
//   response.output_text.done, content_part.done, output_item.done  when generation ends
//   response.completed                                              the final object, with usage
//
// A tool call (vLLM with a tool parser) is a function_call item instead: output_item.added once
// the name is known, response.function_call_arguments.delta per fragment, .done, output_item.done.

import type { Usage } from './chunks.js';
import { randomHex } from './hash.js';
import type { TokenDelta } from './output.js';
import type { ResponsesMeta } from './request.js';

export interface ResponseIdentity {
  created: number;
  model: string;
}

type Obj = Record<string, unknown>;

const event = (type: string, json: string): string => `event: ${type}\ndata: ${json}\n\n`;

function usageObject(u: Usage): Obj {
  return {
    input_tokens: u.promptTokens,
    input_tokens_details: { cached_tokens: u.cachedTokens ?? 0, cache_write_tokens: 0, input_tokens_per_turn: [], cached_tokens_per_turn: [] },
    output_tokens: u.completionTokens,
    output_tokens_details: { reasoning_tokens: 0, tool_output_tokens: 0, output_tokens_per_turn: [], tool_output_tokens_per_turn: [] },
    total_tokens: u.promptTokens + u.completionTokens,
  };
}

export type ResponseStatus = 'in_progress' | 'completed' | 'incomplete';

/** The response object (ResponsesResponse): the non-streamed body, the store's copy, and inside the stream's events. */
export function responseObject(meta: ResponsesMeta, r: ResponseIdentity, status: ResponseStatus, output: Obj[], usage: Usage | null): Obj {
  return {
    id: meta.id,
    created_at: r.created,
    incomplete_details: status === 'incomplete' ? { reason: 'max_output_tokens' } : null,
    instructions: meta.instructions,
    metadata: null,
    model: r.model,
    object: 'response',
    output,
    parallel_tool_calls: true,
    temperature: 1.0,
    tool_choice: meta.toolChoice,
    tools: meta.tools,
    top_p: 1.0,
    background: false,
    max_output_tokens: meta.maxOutputTokens,
    max_tool_calls: null,
    previous_response_id: meta.previousResponseId,
    prompt: null,
    reasoning: null,
    service_tier: 'auto',
    status,
    text: null,
    top_logprobs: null,
    truncation: 'disabled',
    usage: usage === null ? null : usageObject(usage),
    user: null,
    presence_penalty: 0.0,
    frequency_penalty: 0.0,
    kv_transfer_params: null,
    ec_transfer_params: null,
    input_messages: null,
    output_messages: null,
  };
}

/** What one response generated, built up token by token: its output items, and its stream events. */
export interface ResponsesOutput {
  /** response.created and response.in_progress: written when the stream opens. */
  start(): string;
  /** The events one generated token streams ('' for none). */
  token(d: TokenDelta): string;
  /** Closing events of the open item and response.completed. */
  finish(status: ResponseStatus, usage: Usage): string;
  /** The output items so far (closed). */
  items(): Obj[];
  /** The assistant text (what a follow-up's prompt carries over). */
  text(): string;
}

export function createResponsesOutput(meta: ResponsesMeta, r: ResponseIdentity): ResponsesOutput {
  let seq = 0;
  const ev = (type: string, data: Obj) => event(type, JSON.stringify({ ...data, sequence_number: seq++, type }));
  // One per token: written as text, like the chat chunks, not built and serialised as an object.
  const delta = (type: string, text: string, itemId: string, extra: string) =>
    event(type, `{${extra}"delta":${JSON.stringify(text)},"item_id":"${itemId}",${extra === '' ? '' : '"logprobs":[],'}"output_index":0,"sequence_number":${seq++},"type":"${type}"}`);
  let text = '';
  let messageId: string | null = null;
  let call: { id: string; call_id: string; name: string; arguments: string } | null = null;

  const messageItem = (status: string): Obj => ({
    id: messageId,
    content: status === 'completed' ? [{ annotations: [], text, type: 'output_text', logprobs: null }] : [],
    role: 'assistant',
    status,
    type: 'message',
    phase: null,
  });
  const callItem = (status: string): Obj => ({ arguments: call!.arguments, call_id: call!.call_id, name: call!.name, type: 'function_call', id: call!.id, status });

  return {
    start() {
      const inProgress = responseObject(meta, r, 'in_progress', [], null);
      return ev('response.created', { response: inProgress }) + ev('response.in_progress', { response: inProgress });
    },
    token(d) {
      switch (d.t) {
        case 'text': {
          // The end-of-turn token detokenizes to '': nothing to stream.
          if (d.text === '') return '';
          let out = '';
          if (messageId === null) {
            messageId = `msg_${randomHex(16)}`;
            out += ev('response.output_item.added', { item: messageItem('in_progress'), output_index: 0 });
            out += ev('response.content_part.added', { content_index: 0, item_id: messageId, output_index: 0, part: { annotations: [], text: '', type: 'output_text', logprobs: null } });
          }
          text += d.text;
          return out + delta('response.output_text.delta', d.text, messageId, '"content_index":0,');
        }
        case 'tool-name':
          call = { id: `fc_${randomHex(32)}`, call_id: d.id, name: d.name, arguments: '' };
          return ev('response.output_item.added', { item: callItem('in_progress'), output_index: 0 });
        case 'tool-args':
          if (call === null) return '';
          call.arguments += d.args;
          return delta('response.function_call_arguments.delta', d.args, call.id, '');
        case 'none':
          return '';
      }
    },
    finish(status, usage) {
      let out = '';
      if (messageId !== null) {
        out += ev('response.output_text.done', { content_index: 0, item_id: messageId, logprobs: [], output_index: 0, text });
        out += ev('response.content_part.done', { content_index: 0, item_id: messageId, output_index: 0, part: { annotations: [], text, type: 'output_text', logprobs: null } });
        out += ev('response.output_item.done', { item: messageItem('completed'), output_index: 0 });
      }
      if (call !== null) {
        out += ev('response.function_call_arguments.done', { arguments: call.arguments, item_id: call.id, name: call.name, output_index: 0 });
        out += ev('response.output_item.done', { item: callItem('completed'), output_index: 0 });
      }
      return out + ev('response.completed', { response: responseObject(meta, r, status, this.items(), usage) });
    },
    items() {
      const out: Obj[] = [];
      if (messageId !== null) out.push(messageItem('completed'));
      if (call !== null) out.push(callItem('completed'));
      return out;
    },
    text: () => text,
  };
}
