import { createParser, type EventSourceMessage } from 'eventsource-parser';

export type SseEvent = EventSourceMessage;

export interface SseEvents {
  /** Feeds bytes (or text) as they arrive; complete events are handed on synchronously. */
  push(chunk: Buffer | string): void;
  /** The stream ended. An event still missing its blank line is dropped, as the SSE spec says. */
  end(): void;
}

export interface SseEventsOptions {
  /**
   * `utf8` (default): event data as the text the server meant, a character split across reads put
   * back together. `latin1`: one character per byte, for a reader that only looks for ASCII
   * markers — the same events, without the cost of a UTF-8 decoder (the gateway's tap).
   */
  readonly bytes?: 'utf8' | 'latin1';
  /** An event or line longer than this is dropped, the rest of the stream still read. */
  readonly maxEventBytes?: number;
}

/**
 * The one reader of server-sent events, shared by the gateway's tap, `warmroute probe` and the
 * benchmark clients: eventsource-parser (the WHATWG parsing rules), fed bytes as they arrive, so
 * an event split across reads is put back together. A stream without line breaks cannot grow a
 * buffer without bound (maxEventBytes, 1 MiB by default).
 */
export function createSseEvents(onEvent: (e: SseEvent) => void, opts: SseEventsOptions = {}): SseEvents {
  const decoder = opts.bytes === 'latin1' ? null : new TextDecoder('utf-8');
  const parser = createParser({
    onEvent,
    maxBufferSize: opts.maxEventBytes ?? 1 << 20,
    onError: (e) => { if (e.type === 'max-buffer-size-exceeded') parser.reset(); },
  });
  return {
    push(chunk) {
      parser.feed(typeof chunk === 'string' ? chunk : decoder === null ? chunk.toString('latin1') : decoder.decode(chunk, { stream: true }));
    },
    end() {
      const rest = decoder?.decode();
      if (rest) parser.feed(rest);
      parser.reset();
    },
  };
}
