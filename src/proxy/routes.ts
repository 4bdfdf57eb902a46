import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { errors, toWarmrouteError, type WarmrouteError } from '../errors.js';
import { identityWithoutBody, type RequestKind } from '../routing/identity.js';
import { startClock, type HopClock } from '../telemetry/hop-clock.js';
import type { Proxy, ProxyDeps } from './exchange.js';

declare module 'fastify' {
  interface FastifyRequest {
    clock: HopClock;
  }
}

/** The fastify side of the client listener: models, other /v1 paths, errors, 404s. */
export function registerClientRoutes(app: FastifyInstance, deps: ProxyDeps, p: Proxy): void {
  const { config, registry } = deps;
  const bodyLimit = config.limits.bodyBytes;

  app.decorateRequest('clock', null as unknown as HopClock);
  app.addHook('onRequest', (req, _reply, done) => {
    req.clock = startClock();
    done();
  });

  // Keep the body as the bytes received: it is forwarded as is.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit }, (_req, body, done) => done(null, body));

  const reject = (req: FastifyRequest, reply: FastifyReply, err: WarmrouteError) => {
    reply.hijack();
    p.reject(req.raw, reply.raw, err);
  };
  app.setErrorHandler((error, req, reply) => {
    const err = toWarmrouteError(error, bodyLimit);
    if (err.statusCode >= 500) deps.log.error({ err: error, path: req.url }, 'internal error');
    reject(req, reply, err);
  });
  app.setNotFoundHandler((req, reply) => reject(req, reply, errors.notFound([req.method, req.url.split('?')[0]])));

  // POST /v1/chat/completions and /v1/completions are served by the fast path (fast-path.ts)
  // before fastify sees them; these routes answer requests that reach fastify another way
  // (e.g. app.inject), with the same code.
  const completion = (kind: RequestKind) => async (req: FastifyRequest, reply: FastifyReply) => {
    reply.hijack();
    await p.completion(kind, req.raw, reply.raw, Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0), req.clock);
  };
  app.post('/v1/chat/completions', completion('chat'));
  app.post('/v1/completions', completion('completion'));

  app.get('/v1/models', async (_req, reply) => {
    const up = registry.replicas.filter((r) => r.up && !r.draining);
    if (up.length === 0) throw errors.noReplica();
    const byId = new Map<string, unknown>();
    for (const r of up) {
      for (const m of r.modelEntries) {
        const id = (m as { id?: unknown }).id;
        if (typeof id === 'string' && !byId.has(id)) byId.set(id, m);
      }
    }
    return reply.header('content-type', 'application/json').send(JSON.stringify({ object: 'list', data: [...byId.values()] }));
  });

  // Everything else under /v1 (embeddings, tokenize, responses, ...) goes to a routed replica as is.
  app.all('/v1/*', async (req, reply) => {
    const identity = identityWithoutBody(req.headers, deps.identityOptions);
    reply.hijack();
    await p.proxy(req.raw, reply.raw, identity, Buffer.isBuffer(req.body) ? req.body : null, req.clock);
  });
}
