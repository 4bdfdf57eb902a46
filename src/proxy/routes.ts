import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { errorBody, errors, toWarmrouteError, type WarmrouteError } from '../errors.js';
import type { Registry } from '../fleet/registry.js';
import { identify, identityWithoutBody, validateBody, type IdentityOptions, type RequestKind } from '../routing/identity.js';
import type { Decision, RequestIdentity } from '../routing/types.js';
import { nowMs, startClock, type HopClock } from '../telemetry/hop-clock.js';
import type { Metrics } from '../telemetry/metrics.js';
import { forward, type ForwardDeps } from './forward.js';
import { recordExchange, sessionTag } from './record.js';

declare module 'fastify' {
  interface FastifyRequest {
    clock: HopClock;
  }
}

export interface RouteDeps extends ForwardDeps {
  readonly registry: Registry;
  readonly log: Logger;
  readonly identityOptions: IdentityOptions;
  readonly draining: () => boolean;
  /** Tracks open exchanges so a drain can wait for them. */
  track(p: Promise<unknown>): void;
}

function parseJson(body: unknown): unknown {
  if (!Buffer.isBuffer(body) || body.length === 0) throw errors.invalidJson(['the body is empty']);
  try {
    return JSON.parse(body.toString('utf8'));
  } catch (e) {
    throw errors.invalidJson([(e as Error).message]);
  }
}

export function sendError(reply: FastifyReply, err: WarmrouteError): void {
  void reply.code(err.statusCode).header('content-type', 'application/json').send(errorBody(err));
}

/** Logs and counts a request the gateway answered itself with an error, before any routing. */
function recordRejected(deps: RouteDeps, req: FastifyRequest, err: WarmrouteError) {
  deps.metrics.requests.inc({ replica: 'none', route: 'none', code: `${Math.floor(err.statusCode / 100)}xx` });
  deps.log.info({ method: req.method, path: req.url, status: err.statusCode, err: err.openaiCode, detail: err.message }, 'request');
}

export function registerClientRoutes(app: FastifyInstance, deps: RouteDeps): void {
  const { config, metrics, registry, router } = deps;
  const bodyLimit = config.limits.bodyBytes;

  app.decorateRequest('clock', null as unknown as HopClock);
  app.addHook('onRequest', (req, _reply, done) => {
    req.clock = startClock();
    done();
  });

  // Keep the body as the bytes received: it is forwarded as is and parsed once, only for routing.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit }, (_req, body, done) => done(null, body));

  app.setErrorHandler((error, req, reply) => {
    const err = toWarmrouteError(error, bodyLimit);
    if (err.statusCode >= 500) deps.log.error({ err: error, path: req.url }, 'internal error');
    recordRejected(deps, req, err);
    sendError(reply, err);
  });
  app.setNotFoundHandler((req, reply) => {
    const err = errors.notFound([req.method, req.url.split('?')[0]]);
    recordRejected(deps, req, err);
    sendError(reply, err);
  });

  async function proxy(req: FastifyRequest, reply: FastifyReply, identity: RequestIdentity, body: Buffer | null) {
    if (deps.draining()) throw errors.shuttingDown();
    const clock = req.clock;
    if (clock.parsed === 0) clock.parsed = nowMs();
    const decision: Decision = router.route({ identity, replicas: registry.views });
    clock.routed = nowMs();
    metrics.decisions.inc({ reason: decision.reason });
    reply.hijack();
    const exchange = forward({
      req: req.raw, res: reply.raw, method: req.method, path: req.url, body, identity, decision, clock, draining: deps.draining,
    }, deps);
    deps.track(exchange);
    const outcome = await exchange;
    recordExchange(deps, { method: req.method, path: req.url, identity, clock, outcome });
  }

  const routed = (kind: RequestKind) => async (req: FastifyRequest, reply: FastifyReply) => {
    const parsed = parseJson(req.body);
    validateBody(kind, parsed);
    const identity = identify(kind, parsed, req.headers, deps.identityOptions);
    req.clock.parsed = nowMs();
    if (config.logging.logPrompts) deps.log.debug({ session: sessionTag(identity.sessionKey), body: parsed }, 'request body');
    return proxy(req, reply, identity, req.body as Buffer);
  };

  app.post('/v1/chat/completions', routed('chat'));
  app.post('/v1/completions', routed('completion'));

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
    const body = Buffer.isBuffer(req.body) ? req.body : null;
    return proxy(req, reply, identity, body);
  });
}
