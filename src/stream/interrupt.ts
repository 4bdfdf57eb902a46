import type { ServerResponse } from 'node:http';
import { errorBody, type ErrorShape, type WarmrouteError } from '../errors.js';

/**
 * Ends a response whose replica failed after its first byte, so that no client can take what it
 * received for a whole answer. An event stream (always relayed without a Content-Length, so it can
 * be extended) gets one `data: {"error":...}` event and no [DONE]: OpenAI SDKs raise on it. An
 * Anthropic Messages stream gets Anthropic's own `event: error`, which its SDKs raise as an API
 * error (a bare data event would be skipped, and the stream taken as ended). Any other body is cut
 * off: the client sees its connection end before the body did.
 */
export function endInterrupted(res: ServerResponse, err: WarmrouteError, sse: boolean, shape: ErrorShape = 'openai'): void {
  if (sse) {
    // Blank lines first: whatever partial event the replica left unterminated ends there.
    res.end(shape === 'anthropic' ? `\n\nevent: error\ndata: ${errorBody(err, shape)}\n\n` : `\n\ndata: ${errorBody(err)}\n\n`);
  } else {
    res.destroy(err);
  }
}
