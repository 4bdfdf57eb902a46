import { createParser, type EventSourceMessage } from 'eventsource-parser';

export type SseEvent = EventSourceMessage;

export interface SseEvents {
  /** Feeds bytes (or text) as they arrive; complete events are handed on synchronously. */
  push(chunk: Buffer | string): void;
  /** The stream ended: an event still missing its blank line is handed on. */
  end(): void;
}

/**
 * The one reader of server-sent events, shared by the gateway's tap, `warmroute probe` and the
 * benchmark clients: eventsource-parser (the WHATWG parsing rules) behind a streaming UTF-8
 * decoder, so a character or an event split across reads is put back together. An event or line
 * longer than `maxEventBytes` is dropped, with the rest of the stream still read, so a stream
 * without line breaks cannot grow a buffer without bound.
 */
export function createSseEvents(onEvent: (e: SseEvent) => void, maxEventBytes = 1 << 20): SseEvents {
  const decoder = new TextDecoder('utf-8');
  const parser = createParser({
    onEvent,
    maxBufferSize: maxEventBytes,
    onError: (e) => { if (e.type === 'max-buffer-size-exceeded') parser.reset(); },
  });
  return {
    push(chunk) {
      parser.feed(typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true }));
    },
    end() {
      const rest = decoder.decode();
      if (rest) parser.feed(rest);
      parser.reset({ consume: true });
    },
  };
}
