// A session's conversation as it goes over the wire: the request body and headers for the next
// turn, and the history grown by what came back. The history only ever grows by appending, and
// answers go back verbatim, so turn n's messages are a byte-stable prefix of turn n+1's.

import type { ToolCall } from './client.js';
import type { GroupPlan, SessionPlan } from './workload.js';

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string | null;
  tool_calls?: { id: string; type: 'function'; function: { name: string; arguments: string } }[];
  tool_call_id?: string;
}

/** The simulator's served model: sending it keeps the gateway's model filter meaningful. */
export const MODEL = 'google/gemma-4-31B-it';
/** The report's lesson: tool-call turns need ≥ 256 or parallel calls truncate mid-JSON. */
export const MAX_TOKENS = 256;

export function openingHistory(group: GroupPlan): ChatMessage[] {
  return [{ role: 'system', content: group.system }];
}

export function requestOf(session: SessionPlan, group: GroupPlan, messages: readonly ChatMessage[]): { headers: Record<string, string>; body: Record<string, unknown> } {
  const body: Record<string, unknown> = {
    model: MODEL,
    messages,
    tools: group.tools,
    stream: true,
    stream_options: { include_usage: true },
    max_tokens: MAX_TOKENS,
  };
  const headers: Record<string, string> = {};
  if (session.keyMode === 'header') headers['x-session-id'] = session.id;
  if (session.keyMode === 'body') body.prompt_cache_key = session.id;
  return { headers, body };
}

/** What a tool "returns": deterministic in the call, a few dozen tokens like a real lookup. */
export function toolResult(call: ToolCall): string {
  return JSON.stringify({ ok: true, tool: call.name, arguments: call.arguments, reference: `R-${call.id.slice(-8)}`, note: 'Record updated; read the details back to the caller.' });
}

/** The assistant turn as the client sends it back: text verbatim, or the tool call then its result. */
export function answerMessages(content: string, call: ToolCall | null): ChatMessage[] {
  if (!call) return [{ role: 'assistant', content }];
  return [
    { role: 'assistant', content: content === '' ? null : content, tool_calls: [{ id: call.id, type: 'function', function: { name: call.name, arguments: call.arguments } }] },
    { role: 'tool', tool_call_id: call.id, content: toolResult(call) },
  ];
}
