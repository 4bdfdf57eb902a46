import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { errorBody, errors, writeError, type WarmrouteError } from '../errors.js';
import { errorShapeOf } from './routes.js';

/** Limits of the data-plane listener itself, before any request reaches the pipeline. */
const HEADERS_TIMEOUT_MS = 30_000;
/** The whole request, body included, must arrive within this (a slow upload holds a connection). */
const REQUEST_TIMEOUT_MS = 120_000;
/** Above the idle timeouts of common load balancers (60 s), so they close first. */
const KEEP_ALIVE_MS = 65_000;

/**
 * A request node:http could not parse never reaches the pipeline; its answer is still written in
 * OpenAI's shape: 431 for headers over the size limit, 400 for any other framing error.
 */
function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  const tooLarge = err.code === 'HPE_HEADER_OVERFLOW';
  const e: WarmrouteError = tooLarge
    ? errors.headersTooLarge()
    : errors.invalidRequest(['The request is not valid HTTP/1.1']);
  const body = errorBody(e);
  socket.end(`HTTP/1.1 ${e.statusCode} ${tooLarge ? 'Request Header Fields Too Large' : 'Bad Request'}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
}

/** The client-facing HTTP server: every request goes to `handle` (edge/pipeline.ts). */
export function createDataPlaneServer(handle: (req: IncomingMessage, res: ServerResponse) => void): Server {
  const server = createServer({ headersTimeout: HEADERS_TIMEOUT_MS, requestTimeout: REQUEST_TIMEOUT_MS, keepAliveTimeout: KEEP_ALIVE_MS }, handle);
  server.on('clientError', answerClientError);
  // An Expect other than 100-continue: node answers 417 by itself unless told otherwise.
  server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
    res.shouldKeepAlive = false;
    writeError(res, errors.expectationFailed(), [], errorShapeOf((req.url ?? '').split('?', 1)[0]));
  });
  return server;
}
