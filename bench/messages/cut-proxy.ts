// A loopback HTTP proxy in front of one replica that kills a stream mid-way when the request asks
// it to: the request's `x-bench-cut-after-events: K` makes the proxy pass the response's first K
// SSE events, then destroy the connection, as a replica whose process died would. It is how the
// Messages benchmark injects mid-stream failures into a real vLLM fleet, which has no fault switch
// of its own; the simulated fleet goes through the same proxy, so both runs inject alike. Requests
// without the header (the gateway's health probes and scrapes too) pass untouched.

import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pipeline } from 'node:stream/promises';
import { Agent, request } from 'undici';
import { clientResponseHeaders, upstreamRequestHeaders } from '../../src/upstream/headers.js';

/** The number of SSE events to pass before the cut. */
export const CUT_AFTER_HEADER = 'x-bench-cut-after-events';
/** The request's id, under which the proxy records whether it cut. */
export const CUT_ID_HEADER = 'x-bench-cut-id';

export interface CutProxy {
  readonly url: string;
  /** Request id → the events passed before the cut, for every stream this proxy cut. */
  readonly cut: Map<string, number>;
  close(): Promise<void>;
}

const LF = 0x0a;

/** Where the `after`-th event of a stream ends in `chunk` ("\n\n"), given the events and last byte before it; -1 if not in it. */
function eventEnd(chunk: Buffer, state: { events: number; prev: number }, after: number): number {
  for (let i = 0; i < chunk.length; i++) {
    const b = chunk[i];
    if (b === LF && state.prev === LF && ++state.events === after) return i + 1;
    state.prev = b;
  }
  return -1;
}

const written = (res: ServerResponse, b: Buffer) => new Promise<void>((resolve, reject) => res.write(b, (e) => (e ? reject(e) : resolve())));

export async function startCutProxy(target: string): Promise<CutProxy> {
  const dispatcher = new Agent({ keepAliveTimeout: 30_000 });
  const cut = new Map<string, number>();

  async function forward(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const after = Number(req.headers[CUT_AFTER_HEADER] ?? 0);
    const length = req.headers['content-length'];
    const headers = upstreamRequestHeaders(req, undefined);
    if (length !== undefined) headers.push('content-length', length);
    const hasBody = req.method !== 'GET' && req.method !== 'HEAD';
    const up = await request(`${target}${req.url}`, { method: req.method as 'GET', headers, body: hasBody ? req : undefined, dispatcher });
    const h = clientResponseHeaders(up.headers);
    res.writeHead(up.statusCode, h.contentLength === null ? h.headers : [...h.headers, 'content-length', h.contentLength]);
    if (!(after > 0) || !h.contentType.startsWith('text/event-stream')) return pipeline(up.body, res);
    const state = { events: 0, prev: 0 };
    try {
      for await (const chunk of up.body as AsyncIterable<Buffer>) {
        const end = eventEnd(chunk, state, after);
        if (end < 0) {
          await written(res, chunk);
          continue;
        }
        // The K-th event goes out whole, then the connection dies with nothing after it.
        await written(res, chunk.subarray(0, end));
        cut.set(String(req.headers[CUT_ID_HEADER] ?? ''), after);
        res.destroy();
        up.body.destroy();
        return;
      }
      res.end();
    } catch {
      // The gateway left (its client aborted): the replica's stream goes too.
      up.body.destroy();
      res.destroy();
    }
  }

  const server = createServer((req, res) => {
    forward(req, res).catch((e: Error) => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' }).end(`cut proxy: ${e.message}`);
      else res.destroy();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    cut,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      await dispatcher.close();
    },
  };
}
