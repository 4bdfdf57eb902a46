import { createHash, timingSafeEqual } from 'node:crypto';
import Fastify, { type FastifyInstance } from 'fastify';
import type { Registry } from '../fleet/registry.js';
import type { Router } from '../routing/types.js';
import type { Metrics } from '../telemetry/metrics.js';

export interface AdminDeps {
  readonly registry: Registry;
  readonly router: Router;
  readonly metrics: Metrics;
  readonly draining: () => boolean;
  /** Refreshes gauges that are cheap per scrape but not per request. */
  readonly beforeScrape?: () => void;
  /** When set, every /admin/* request needs `Authorization: Bearer <token>`. */
  readonly token?: string | null;
}

const OPEN_PATHS = new Set(['/metrics', '/healthz', '/readyz']);

const digest = (s: string) => createHash('sha256').update(s).digest();

/** Whether an Authorization header carries the token; compared in constant time (as digests of equal length). */
function bearerMatches(header: string | undefined, want: Buffer): boolean {
  const got = header !== undefined && /^bearer\s+/i.test(header) ? header.replace(/^bearer\s+/i, '') : '';
  return timingSafeEqual(digest(got), want) && got !== '';
}

/** The admin listener: metrics, probes and fleet/session inspection, on its own port. */
export function buildAdmin(deps: AdminDeps): FastifyInstance {
  const { registry, router, metrics } = deps;
  const app = Fastify({ logger: false });
  // /metrics, /healthz and /readyz stay open for probes and scrapers; everything else — /admin/*
  // inspection and every mutation, and any spelling of a path that is not exactly one of those
  // three — needs the token once one is configured.
  if (deps.token) {
    const want = digest(deps.token);
    app.addHook('onRequest', (req, reply, done) => {
      const q = req.url.indexOf('?');
      if (OPEN_PATHS.has(q < 0 ? req.url : req.url.slice(0, q)) || bearerMatches(req.headers.authorization, want)) return done();
      reply.code(401).header('www-authenticate', 'Bearer').send({ error: { message: 'The admin API needs Authorization: Bearer <admin token>', type: 'invalid_request_error', param: null, code: 'invalid_admin_token' } });
    });
  }

  app.get('/metrics', async (_req, reply) => {
    deps.beforeScrape?.();
    reply.header('content-type', metrics.registry.contentType);
    return metrics.registry.metrics();
  });
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_req, reply) => {
    const up = registry.replicas.filter((r) => r.up).length;
    const ready = !deps.draining() && up > 0;
    return reply.code(ready ? 200 : 503).send({ ready, draining: deps.draining(), replicasUp: up, replicas: registry.replicas.length });
  });
  app.get('/admin/replicas', async () => {
    const pins = router.pinsByReplica();
    return {
      strategy: router.strategy,
      replicas: registry.replicas.map((r) => ({
        name: r.name,
        state: r.draining ? 'draining' : r.up ? 'up' : 'down',
        inflight: r.inflight,
        sessionsPinned: pins.get(r.name) ?? 0,
        waiting: r.waiting,
        running: r.running,
        kvUsage: r.kvUsage,
        kvCapacityTokens: r.kvCapacityTokens,
        models: r.models ? [...r.models] : null,
        lastError: r.lastError,
        lastErrorAt: r.lastErrorAt === null ? null : new Date(r.lastErrorAt).toISOString(),
      })),
    };
  });
  app.get('/admin/routing', async () => {
    const st = router.stats();
    return {
      strategy: router.strategy,
      prefixEntries: st.prefixEntries,
      tokenScale: st.tokenScale,
      replicas: Object.fromEntries(registry.replicas.map((r) => [r.name, {
        prefixTokens: st.prefixTokensByReplica.get(r.name) ?? 0,
        cost: st.costByReplica.get(r.name) ?? null,
      }])),
    };
  });
  app.get<{ Params: { key: string } }>('/admin/sessions/:key', async (req, reply) => {
    const s = router.session(req.params.key);
    const d = router.lastDrift(req.params.key);
    if (!s && !d) return reply.code(404).send({ error: { message: 'no pin for that session key', type: 'not_found_error', param: 'key', code: 'session_not_found' } });
    const lastDrift = d === null ? null : { where: d.where, message: d.message, at: new Date(d.at).toISOString() };
    return s ? { ...s, since: new Date(s.since).toISOString(), lastSeen: new Date(s.lastSeen).toISOString(), lastDrift } : { key: req.params.key, replica: null, lastDrift };
  });
  app.delete<{ Params: { key: string } }>('/admin/sessions/:key', async (req, reply) => {
    const removed = router.unpin(req.params.key);
    return reply.code(removed ? 200 : 404).send({ unpinned: removed });
  });
  app.get<{ Params: { id: string } }>('/admin/responses/:id', async (req, reply) => {
    const r = router.storedResponse(req.params.id);
    if (!r) return reply.code(404).send({ error: { message: 'no record of that response id', type: 'not_found_error', param: 'id', code: 'response_not_found' } });
    return { id: r.key, replica: r.replica, storedAt: new Date(r.since).toISOString(), lastSeen: new Date(r.lastSeen).toISOString() };
  });
  return app;
}
