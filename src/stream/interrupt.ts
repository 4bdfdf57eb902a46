import type { ServerResponse } from 'node:http';
import { errorBody, type WarmrouteError } from '../errors.js';

/**
 * Ends a response whose replica failed after its first byte, so that no client can take what it
 * received for a whole answer. An event stream (always relayed without a Content-Length, so it can
 * be extended) gets one `data: {"error":...}` event and no [DONE]: OpenAI SDKs raise on it. Any
 * other body is cut off: the client sees its connection end before the body did.
 */
export function endInterrupted(res: ServerResponse, err: WarmrouteError, sse: boolean): void {
  if (sse) {
    // Blank lines first: whatever partial event the replica left unterminated ends there.
    res.end(`\n\ndata: ${errorBody(err)}\n\n`);
  } else {
    res.destroy(err);
  }
}
