// The load generator's streaming client. TTFT is request sent → first SSE chunk carrying content
// (text or a tool call), as the field report measured it; the gateway's headers (replica, route
// reason, Server-Timing hops) and the usage chunk are kept for the per-turn record. Chat
// completions and the Responses API differ only in how their events are read.

import { Agent, request } from 'node:http';
import { createSseEvents } from '../../src/stream/sse-events.js';

export interface ToolCall {
  id: string;
  name: string;
  arguments: string;
}

export interface Exchange {
  status: number;
  /** performance.now() when the request was written. */
  sentAt: number;
  ttftMs: number | null;
  totalMs: number;
  replica: string | null;
  route: string | null;
  /** Server-Timing entries in ms: parse, route, queue, connect, upstream_headers. */
  hops: Record<string, number>;
  content: string;
  toolCall: ToolCall | null;
  finishReason: string | null;
  promptTokens: number | null;
  cachedTokens: number | null;
  completionTokens: number | null;
  done: boolean;
  error: string | null;
  /** Responses API: the response's id, and its output items (what a client resends as history). */
  responseId: string | null;
  output: unknown[] | null;
}

/** Reads one SSE event's data into the exchange (throws on unparsable data). */
export type EventReader = (data: string, out: Exchange) => void;

export function keepAliveAgent(): Agent {
  // TCP_NODELAY, as undici and node's servers set it: a measuring client must not let Nagle hold a
  // request's body behind its headers.
  return new Agent({ keepAlive: true, maxSockets: 512, noDelay: true });
}

/** `parse;dur=0.120, route;dur=0.030` → { parse: 0.12, route: 0.03 }. */
export function parseServerTiming(value: string | undefined): Record<string, number> {
  const out: Record<string, number> = {};
  for (const entry of (value ?? '').split(',')) {
    const [name, ...params] = entry.trim().split(';');
    const dur = params.map((p) => p.trim()).find((p) => p.startsWith('dur='));
    if (name && dur) out[name] = Number(dur.slice(4));
  }
  return out;
}

type Chunk = {
  choices?: { delta?: { content?: string | null; tool_calls?: { id?: string; function?: { name?: string; arguments?: string } }[] }; finish_reason?: string | null }[];
  usage?: { prompt_tokens: number; completion_tokens: number; prompt_tokens_details?: { cached_tokens?: number } | null } | null;
  error?: { message?: string };
};

function header(v: string | string[] | undefined): string | null {
  return v === undefined ? null : Array.isArray(v) ? v.join(',') : v;
}

const firstOutput = (out: Exchange) => { if (out.ttftMs === null) out.ttftMs = performance.now() - out.sentAt; };

/** Chat completions chunks: content and tool-call deltas, the usage chunk, [DONE]. */
export const readChatEvent: EventReader = (data, out) => {
  if (data === '[DONE]') {
    out.done = true;
    return;
  }
  const chunk = JSON.parse(data) as Chunk;
  if (chunk.error) out.error = chunk.error.message ?? 'error event';
  if (chunk.usage) {
    out.promptTokens = chunk.usage.prompt_tokens;
    out.completionTokens = chunk.usage.completion_tokens;
    out.cachedTokens = chunk.usage.prompt_tokens_details?.cached_tokens ?? null;
  }
  const c = chunk.choices?.[0];
  if (!c) return;
  const text = c.delta?.content ?? '';
  const calls = c.delta?.tool_calls ?? [];
  if (text !== '' || calls.length > 0) firstOutput(out);
  out.content += text;
  for (const tc of calls) {
    if (tc.id) out.toolCall = { id: tc.id, name: tc.function?.name ?? '', arguments: tc.function?.arguments ?? '' };
    else if (out.toolCall) out.toolCall.arguments += tc.function?.arguments ?? '';
  }
  if (c.finish_reason) out.finishReason = c.finish_reason;
};

type ResponsesEvent = {
  type?: string;
  delta?: string;
  item?: { type?: string; call_id?: string; name?: string };
  response?: { id: string; status?: string; output?: unknown[]; usage?: { input_tokens: number; output_tokens: number; input_tokens_details?: { cached_tokens?: number } } | null };
  error?: { message?: string };
};

/**
 * Responses API events: the id from response.created, text deltas, a function call's item and
 * argument deltas, usage and the output items from response.completed (the stream's end).
 */
export const readResponsesEvent: EventReader = (data, out) => {
  const e = JSON.parse(data) as ResponsesEvent;
  // The gateway ends a stream that broke off with a plain {"error":...} event.
  if (e.error && e.type === undefined) {
    out.error = e.error.message ?? 'error event';
    return;
  }
  switch (e.type) {
    case 'response.created':
      out.responseId = e.response?.id ?? null;
      return;
    case 'response.output_text.delta':
      if (e.delta) firstOutput(out);
      out.content += e.delta ?? '';
      return;
    case 'response.output_item.added':
      if (e.item?.type !== 'function_call') return;
      firstOutput(out);
      out.toolCall = { id: e.item.call_id ?? '', name: e.item.name ?? '', arguments: '' };
      return;
    case 'response.function_call_arguments.delta':
      if (out.toolCall) out.toolCall.arguments += e.delta ?? '';
      return;
    case 'response.completed':
    case 'response.incomplete': {
      const r = e.response;
      out.done = true;
      out.output = r?.output ?? null;
      out.finishReason = r?.status === 'incomplete' ? 'length' : out.toolCall ? 'tool_calls' : 'stop';
      if (r?.usage) {
        out.promptTokens = r.usage.input_tokens;
        out.completionTokens = r.usage.output_tokens;
        out.cachedTokens = r.usage.input_tokens_details?.cached_tokens ?? null;
      }
      return;
    }
    case 'response.failed':
      out.error = 'response.failed';
  }
};

/** One streamed chat completion; never rejects (failures come back in `error`). */
export function streamChatExchange(url: string, headers: Record<string, string>, body: unknown, agent: Agent, timeoutMs: number): Promise<Exchange> {
  return streamExchange(url, '/v1/chat/completions', headers, body, agent, timeoutMs, readChatEvent);
}

/** One streamed POST (`path`), its events read by `read`; never rejects (failures come back in `error`). */
export function streamExchange(url: string, path: string, headers: Record<string, string>, body: unknown, agent: Agent, timeoutMs: number, read: EventReader): Promise<Exchange> {
  const payload = Buffer.from(JSON.stringify(body));
  return new Promise((resolve) => {
    const out: Exchange = {
      status: 0, sentAt: performance.now(), ttftMs: null, totalMs: 0, replica: null, route: null, hops: {},
      content: '', toolCall: null, finishReason: null, promptTokens: null, cachedTokens: null, completionTokens: null,
      done: false, error: null, responseId: null, output: null,
    };
    let settled = false;
    const finish = (error: string | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      out.totalMs = performance.now() - out.sentAt;
      if (error && !out.error) out.error = error;
      resolve(out);
    };
    const req = request(`${url}${path}`, {
      method: 'POST',
      agent,
      headers: { ...headers, 'content-type': 'application/json', 'content-length': payload.length },
    }, (res) => {
      out.status = res.statusCode ?? 0;
      out.replica = header(res.headers['x-warmroute-replica']);
      out.route = header(res.headers['x-warmroute-route']);
      out.hops = parseServerTiming(header(res.headers['server-timing']) ?? undefined);
      const events = createSseEvents(({ data }) => {
        try {
          read(data, out);
        } catch {
          out.error = 'unparsable SSE event';
        }
      });
      res.on('data', (d: Buffer) => events.push(d));
      res.on('error', (e) => finish(e.message));
      res.on('close', () => finish(res.complete ? (out.status === 200 ? null : `HTTP ${out.status}`) : 'stream cut'));
    });
    const timer = setTimeout(() => {
      req.destroy(new Error(`timeout after ${timeoutMs} ms`));
    }, timeoutMs);
    req.on('error', (e) => finish(e.message));
    out.sentAt = performance.now();
    req.end(payload);
  });
}
