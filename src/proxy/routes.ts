import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { errors, toWarmrouteError, type WarmrouteError } from '../errors.js';
import { identityWithoutBody } from '../routing/identity.js';
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

  // POST /v1/chat/completions and /v1/completions never get here: the node:http fast path
  // (fast-path.ts) serves them before fastify sees the request.

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
