// Mid-stream resume (resume.enabled, off by default). While a chat stream is relayed, the events
// the client received are kept (bounded); if the replica dies, the partial answer is rebuilt from
// them, the request goes to the next replica with that answer as a final assistant message to
// continue (vLLM's `continue_final_message`), and the continuation is spliced into the client's
// stream under the original id. Everything here runs only with resume on; the JSON work happens
// once, at the moment of the failure.

import { createSseEvents } from './sse-events.js';

/** Why a broken stream was not resumed: a bounded metric label. */
export type NotResumable = 'tool_call' | 'too_long' | 'nothing_sent' | 'unreadable';

export interface ResumeLog {
  /**
   * The bytes of a chunk the client may have now: everything up to the last complete event (an
   * incomplete event is held back until its end arrives, so a failure never leaves half an event
   * at the client). Once the log is over its bound it stops holding anything back and the stream
   * can no longer be resumed.
   */
  accept(chunk: Buffer): Buffer;
  /** The stream ended: what was held back (an unterminated last event), for the client. */
  rest(): Buffer | undefined;
  /** The answer so far, or why it cannot be continued. */
  partial(): { id: string; text: string } | NotResumable;
}

const LF = 0x0a;
const CR = 0x0d;

/**
 * Index just past the last blank line in `b` (an event's end), 0 when there is none. A line ends
 * in CRLF, LF or CR (the SSE grammar): a blank line is one line end right after another. A CR
 * that ends `b` may be half of a CRLF whose LF is in the next read: not counted yet.
 */
function endOfLastEvent(b: Buffer): number {
  for (let i = b.length - 1; i > 0; i--) {
    const c = b[i];
    if (c !== LF && (c !== CR || i === b.length - 1)) continue;
    const before = c === LF && b[i - 1] === CR ? i - 2 : i - 1;
    if (before >= 0 && (b[before] === LF || b[before] === CR)) return i + 1;
  }
  return 0;
}

export function createResumeLog(maxBytes: number): ResumeLog {
  const events: Buffer[] = [];
  let logged = 0;
  let held: Buffer | null = null;
  let over = false;
  return {
    accept(chunk) {
      if (over) return chunk;
      const all = held === null ? chunk : Buffer.concat([held, chunk]);
      const end = endOfLastEvent(all);
      const ready = all.subarray(0, end);
      held = end < all.length ? Buffer.from(all.subarray(end)) : null;
      if (ready.length > 0 || held !== null) {
        logged += ready.length;
        // An event that never ends is not held back without bound either.
        if (logged + (held?.length ?? 0) > maxBytes) {
          over = true;
          events.length = 0;
          const rest = held;
          held = null;
          return rest === null ? ready : Buffer.concat([ready, rest]);
        }
        if (ready.length > 0) events.push(Buffer.from(ready));
      }
      return ready;
    },
    rest() {
      const r = held ?? undefined;
      held = null;
      return r;
    },
    partial() {
      if (over) return 'too_long';
      let id: string | null = null;
      let text = '';
      let toolCall = false;
      let unreadable = false;
      const reader = createSseEvents(({ data }) => {
        if (data === '[DONE]') return;
        try {
          const chunk = JSON.parse(data) as { id?: unknown; choices?: { delta?: { content?: unknown; tool_calls?: unknown[] } }[] };
          if (id === null && typeof chunk.id === 'string') id = chunk.id;
          const delta = chunk.choices?.[0]?.delta;
          if (typeof delta?.content === 'string') text += delta.content;
          if (Array.isArray(delta?.tool_calls) && delta.tool_calls.length > 0) toolCall = true;
        } catch {
          unreadable = true;
        }
      });
      for (const e of events) reader.push(e);
      // Every logged event ends in a blank line, but a final CR may still be taken for half a CRLF:
      // one more line end settles it (an extra blank line dispatches nothing).
      reader.push('\n');
      if (toolCall) return 'tool_call';
      if (unreadable || id === null) return 'unreadable';
      if (text === '') return 'nothing_sent';
      return { id, text };
    },
  };
}

/** The request again, the partial answer appended as the assistant message to continue. */
export function continuationBody(parsed: Record<string, unknown>, partialText: string): string {
  const messages = parsed.messages as unknown[];
  return JSON.stringify({
    ...parsed,
    messages: [...messages, { role: 'assistant', content: partialText }],
    continue_final_message: true,
    add_generation_prompt: false,
  });
}

/**
 * The continuation's events as the client's stream goes on: the role-only opening chunk dropped
 * (the client had one), each event's id set to the original stream's, everything else as sent.
 */
export function createSplice(originalId: string): { rewrite(chunk: Buffer): string } {
  let out = '';
  let newId: string | null = null;
  const reader = createSseEvents(({ data }) => {
    if (data !== '[DONE]') {
      if (newId === null) newId = /"id"\s*:\s*"([^"]*)"/.exec(data)?.[1] ?? '';
      if (/"delta"\s*:\s*\{\s*"role"\s*:\s*"assistant"\s*(,\s*"content"\s*:\s*"")?\s*\}/.test(data)) return;
      if (newId !== '') data = data.replace(`"id":"${newId}"`, `"id":"${originalId}"`);
    }
    out += `data: ${data}\n\n`;
  });
  return {
    rewrite(chunk) {
      out = '';
      reader.push(chunk);
      return out;
    },
  };
}
