// A small streaming client for calibration and tests: TTFT is send → first SSE chunk carrying
// content (text or a tool call), measured as the field report did, on a warm keep-alive socket.

import { Agent, request } from 'node:http';
import { renderChat, type ChatMessage } from './tokenizer.js';
import { createSseEvents } from '../../src/stream/sse-events.js';

export interface StreamResult {
  status: number;
  ttftMs: number | null;
  totalMs: number;
  chunks: Record<string, unknown>[];
  /** Arrival of each chunk, ms after the request was sent. */
  chunkTimes: number[];
  content: string;
  finishReason: string | null;
  usage: { prompt_tokens: number; completion_tokens: number; prompt_tokens_details?: { cached_tokens: number } } | null;
  done: boolean;
  /** The connection broke before the response ended (e.g. the replica died mid-stream). */
  broken: boolean;
  raw: string;
}

export function keepAliveAgent(): Agent {
  return new Agent({ keepAlive: true, maxSockets: 256 });
}

type Delta = { content?: string; tool_calls?: unknown[] };
type Choice = { delta?: Delta; text?: string; finish_reason?: string | null };

/** `headers`: sent besides the content type (x-priority, x-session-id). */
export function streamRequest(url: string, path: string, body: unknown, agent?: Agent, headers: Record<string, string> = {}): Promise<StreamResult> {
  const payload = Buffer.from(JSON.stringify(body));
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const out: StreamResult = {
      status: 0,
      ttftMs: null,
      totalMs: 0,
      chunks: [],
      chunkTimes: [],
      content: '',
      finishReason: null,
      usage: null,
      done: false,
      broken: false,
      raw: '',
    };
    const req = request(
      `${url}${path}`,
      { method: 'POST', agent, headers: { ...headers, 'content-type': 'application/json', 'content-length': payload.length } },
      (res) => {
        out.status = res.statusCode ?? 0;
        const events = createSseEvents(({ data }) => {
          if (data === '[DONE]') {
            out.done = true;
            return;
          }
          const chunk = JSON.parse(data) as { choices?: Choice[]; usage?: StreamResult['usage'] };
          out.chunks.push(chunk as Record<string, unknown>);
          out.chunkTimes.push(performance.now() - t0);
          if (chunk.usage) out.usage = chunk.usage;
          const c = chunk.choices?.[0];
          if (!c) return;
          const text = c.delta?.content ?? c.text ?? '';
          if (out.ttftMs === null && (text !== '' || (c.delta?.tool_calls?.length ?? 0) > 0)) {
            out.ttftMs = performance.now() - t0;
          }
          out.content += text;
          if (c.finish_reason) out.finishReason = c.finish_reason;
        });
        const parts: Buffer[] = [];
        res.on('data', (d: Buffer) => {
          parts.push(d);
          events.push(d);
        });
        res.on('error', () => {
          out.broken = true;
        });
        res.on('close', () => {
          out.totalMs = performance.now() - t0;
          out.raw = Buffer.concat(parts).toString();
          if (!res.complete) out.broken = true;
          resolve(out);
        });
      },
    );
    req.on('error', (e) => {
      // Once a response has started, its own 'close' reports the breakage.
      if (out.status === 0) reject(e);
      else out.broken = true;
    });
    req.end(payload);
  });
}

export function streamChat(url: string, body: Record<string, unknown>, agent?: Agent): Promise<StreamResult> {
  return streamRequest(url, '/v1/chat/completions', { stream: true, stream_options: { include_usage: true }, ...body }, agent);
}

const FILLER = 'The caller wants a table for two at seven, near the window, and asks about parking. ';

/** One user message whose rendered chat prompt is exactly `tokens` tokens; `nonce` first. */
export function messagesOfTokens(tokens: number, nonce: string): ChatMessage[] {
  const overhead = renderChat([{ role: 'user', content: '' }]).length;
  const chars = (tokens - overhead) * 4;
  if (chars < nonce.length) throw new Error(`${tokens} tokens is too short for the nonce`);
  let text = nonce;
  while (text.length < chars) text += FILLER;
  const messages = [{ role: 'user', content: text.slice(0, chars) }];
  const got = renderChat(messages).length;
  if (got !== tokens) throw new Error(`prompt of ${got} tokens, wanted ${tokens}`);
  return messages;
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

export function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  const idx = Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1));
  return s[idx];
}
