import type { IncomingMessage, ServerResponse } from 'node:http';
import { errors, toWarmrouteError } from '../errors.js';
import type { RequestKind } from '../routing/identity.js';
import { startClock } from '../telemetry/hop-clock.js';
import type { Proxy } from './exchange.js';

const HOT: Record<string, RequestKind> = { '/v1/chat/completions': 'chat', '/v1/completions': 'completion' };

/**
 * The two hot routes, served straight from node:http in front of fastify: the overhead benchmark
 * measured fastify's per-request work (request/reply objects, hooks, content-type parsing) as a
 * visible share of the gateway's added latency. Everything else goes on to fastify.
 * Returns false when the request is not one of them.
 */
export function createFastPath(p: Proxy, opts: { bodyLimit: number; log: { error(o: object, m: string): void } }) {
  function fail(req: IncomingMessage, res: ServerResponse, e: unknown) {
    const err = toWarmrouteError(e, opts.bodyLimit);
    if (err.statusCode >= 500) opts.log.error({ err: e, path: req.url }, 'internal error');
    p.reject(req, res, err);
  }

  return function fastPath(req: IncomingMessage, res: ServerResponse): boolean {
    if (req.method !== 'POST') return false;
    const url = req.url ?? '';
    const q = url.indexOf('?');
    const kind = HOT[q < 0 ? url : url.slice(0, q)];
    if (kind === undefined) return false;

    const clock = startClock();
    const declared = Number(req.headers['content-length'] ?? -1);
    if (declared > opts.bodyLimit) {
      // Say no before reading it; close so the client does not keep sending.
      res.shouldKeepAlive = false;
      fail(req, res, errors.bodyTooLarge([opts.bodyLimit]));
      req.resume();
      return true;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    req.on('data', (c: Buffer) => {
      if (tooLarge) return;
      size += c.length;
      if (size > opts.bodyLimit) {
        tooLarge = true;
        res.shouldKeepAlive = false;
        fail(req, res, errors.bodyTooLarge([opts.bodyLimit]));
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => {
      if (tooLarge) return;
      const body = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size);
      let done: Promise<void>;
      try {
        done = p.completion(kind, req, res, body, clock);
      } catch (e) {
        fail(req, res, e);
        return;
      }
      done.catch((e: unknown) => fail(req, res, e));
    });
    req.on('error', () => { /* the client went away mid-body: nothing to answer */ });
    return true;
  };
}
