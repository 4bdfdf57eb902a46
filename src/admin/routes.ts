import { createHash, timingSafeEqual } from 'node:crypto';
import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import { errorBody, errors, type WarmrouteError } from '../errors.js';
import type { DrainProgress, Registry, ReplicaState } from '../fleet/registry.js';
import type { Turns } from '../record/turns.js';
import type { Router } from '../routing/types.js';
import type { Metrics } from '../telemetry/metrics.js';
import { looksLikeTag, type SessionLookup } from './session-lookup.js';

export interface AdminDeps {
  readonly registry: Registry;
  readonly router: Router;
  readonly metrics: Metrics;
  readonly draining: () => boolean;
  /** Refreshes gauges that are cheap per scrape but not per request. */
  readonly beforeScrape?: () => void;
  /** When set, every /admin/* request needs `Authorization: Bearer <token>`. */
  readonly token?: string | null;
  /**
   * The admin listener is bound to a loopback address only (admin.host 127.0.0.1, ::1,
   * localhost): then nobody off this host can reach it, and changes need no token.
   */
  readonly loopbackListener?: boolean;
  /** The LoRA adapters the gateway manages on a replica (fleet/adapter-loader.ts): loaded, loading, in flight. */
  readonly managedAdapters?: (replica: string) => readonly unknown[];
  /** Drain with warm handoff (fleet/drain.ts); the routes answer 404 without it. */
  /** Caller turns per session (record/turns.ts): the session view shows its last ones. */
  readonly turns?: Pick<Turns, 'lastTurns' | 'forget'>;
  readonly drains?: {
    drain(name: string): boolean;
    undrain(name: string): boolean;
  };
  /** The session whose key tags to what a log line shows (`session`, or a keyless `conversation`). */
  readonly sessionByTag?: SessionLookup;
}

/** Each route's line in the index (GET / and GET /admin), declared where the route is. */
interface RouteDoc { readonly summary: string }

const OPEN_PATHS = new Set(['/metrics', '/healthz', '/readyz']);

/**
 * Whether the TCP peer is this host (127.0.0.0/8, ::1, or IPv4-mapped loopback). The socket's own
 * address only: X-Forwarded-For and the like are whatever the client wrote.
 */
export function isLoopback(address: string | undefined): boolean {
  if (address === undefined) return false;
  const v4 = address.startsWith('::ffff:') ? address.slice(7) : address;
  return v4.startsWith('127.') || address === '::1';
}

/** Whether a listen host accepts connections from this host only. */
export function isLoopbackHost(host: string): boolean {
  const h = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  return h === 'localhost' || isLoopback(h);
}

/** A request that changes something (drain, undrain, unpin), as opposed to one that reads. */
const changes = (method: string) => method !== 'GET' && method !== 'HEAD' && method !== 'OPTIONS';

const digest = (s: string) => createHash('sha256').update(s).digest();

/** Whether an Authorization header carries the token; compared in constant time (as digests of equal length). */
function bearerMatches(header: string | undefined, want: Buffer): boolean {
  const got = header !== undefined && /^bearer\s+/i.test(header) ? header.replace(/^bearer\s+/i, '') : '';
  return timingSafeEqual(digest(got), want) && got !== '';
}

const iso = (ms: number | null) => (ms === null || ms === 0 ? null : new Date(ms).toISOString());

/** A drain's progress with its times in ISO 8601, like every time the admin API answers. */
const drainView = (d: DrainProgress | null) => (d === null ? null : { ...d, startedAt: iso(d.startedAt), finishedAt: iso(d.finishedAt) });

function stateOf(r: ReplicaState, now: number): string {
  if (r.draining) return 'draining';
  if (r.up) return 'up';
  if (r.warming) return 'warming';
  return r.ejectedUntil > now ? 'ejected' : 'down';
}

/** An error from errors.ts, in OpenAI's shape with its own headers, as the data plane answers them. */
function sendError(reply: FastifyReply, err: WarmrouteError): FastifyReply {
  for (let i = 0; i < err.headers.length; i += 2) reply.header(err.headers[i], err.headers[i + 1]);
  return reply.code(err.statusCode).type('application/json').send(errorBody(err));
}

/** The admin listener: metrics, probes and fleet/session inspection, on its own port. */
export function buildAdmin(deps: AdminDeps): FastifyInstance {
  const { registry, router, metrics } = deps;
  const app = Fastify({ logger: false });
  // /metrics, /healthz and /readyz stay open for probes and scrapers; everything else — /admin/*
  // inspection and every mutation, and any spelling of a path that is not exactly one of those
  // three — needs the token once one is configured. Without one, reads answer loopback clients
  // only (the admin port listens on every interface by default), and changes are refused unless
  // the listener itself is bound to loopback: a loopback peer is not proof of a local client
  // behind a service-mesh sidecar (Istio delivers inbound traffic from 127.0.0.6) or a same-pod
  // proxy, where every client is one.
  const want = deps.token ? digest(deps.token) : null;
  const loopbackListener = deps.loopbackListener ?? false;
  app.addHook('onRequest', (req, reply, done) => {
    const q = req.url.indexOf('?');
    if (OPEN_PATHS.has(q < 0 ? req.url : req.url.slice(0, q))) return done();
    if (want === null) {
      if (loopbackListener) return done();
      if (!isLoopback(req.socket.remoteAddress)) return void sendError(reply, errors.adminLoopbackOnly());
      if (changes(req.method)) return void sendError(reply, errors.adminChangeNeedsToken());
      return done();
    }
    if (bearerMatches(req.headers.authorization, want)) return done();
    void sendError(reply, errors.adminTokenRequired([], null, undefined, ['www-authenticate', 'Bearer']));
  });

  // The index lists what the routes below declare, so it cannot leave one out or list a dead one.
  const index: { method: string; path: string; summary: string }[] = [];
  app.addHook('onRoute', (route) => {
    const methods = [route.method].flat().filter((m) => m !== 'HEAD');
    if (methods.length === 0) return;
    const summary = (route.config as Partial<RouteDoc> | undefined)?.summary;
    if (summary === undefined) throw new Error(`admin route ${route.url} has no summary for the index (doc())`);
    for (const method of methods) index.push({ method, path: route.url, summary });
  });
  // Every error is JSON in OpenAI's shape (errors.ts), unknown paths and fastify's own included.
  app.setNotFoundHandler((req, reply) => {
    const q = req.url.indexOf('?');
    return sendError(reply, errors.notFound([req.method, `${q < 0 ? req.url : req.url.slice(0, q)} (GET /admin lists the endpoints)`], null));
  });
  app.setErrorHandler((err: { statusCode?: number; message: string }, _req, reply) => {
    const status = err.statusCode ?? 500;
    return sendError(reply, status >= 400 && status < 500 ? errors.invalidRequest([err.message]) : errors.internal());
  });
  const doc = (summary: string) => ({ config: { summary } satisfies RouteDoc });
  const listEndpoints = async () => ({ service: 'warmroute admin', endpoints: index });
  app.get('/', doc('this list of endpoints'), listEndpoints);
  app.get('/admin', doc('this list of endpoints'), listEndpoints);

  app.get('/metrics', doc('Prometheus metrics (open without the admin token)'), async (_req, reply) => {
    deps.beforeScrape?.();
    reply.header('content-type', metrics.registry.contentType);
    return metrics.registry.metrics();
  });
  app.get('/healthz', doc('liveness: the process answers (open)'), async () => ({ status: 'ok' }));
  app.get('/readyz', doc('readiness: not draining and at least one replica up (open)'), async (_req, reply) => {
    const up = registry.replicas.filter((r) => r.up).length;
    const ready = !deps.draining() && up > 0;
    return reply.code(ready ? 200 : 503).send({ ready, draining: deps.draining(), replicasUp: up, replicas: registry.replicas.length });
  });
  app.get('/admin/replicas', doc('every replica: state, load, checks, ejections, drain'), async () => {
    const pins = router.pinsByReplica();
    const now = Date.now();
    return {
      strategy: router.strategy,
      replicas: registry.replicas.map((r) => ({
        name: r.name,
        state: stateOf(r, now),
        source: r.source.kind,
        inflight: r.inflight,
        peerInflight: r.peerInflight,
        sessionsPinned: pins.get(r.name) ?? 0,
        waiting: r.waiting,
        running: r.running,
        kvUsage: r.kvUsage,
        kvCapacityTokens: r.kvCapacityTokens,
        // The load figures above are as old as this: a failed scrape keeps the last ones.
        lastScrapeAt: iso(r.lastScrapeAt),
        scrapeAgeMs: r.lastScrapeAt === null ? null : now - r.lastScrapeAt,
        checks: { healthy: r.healthy, failures: r.checkFailures, successes: r.checkSuccesses },
        ejection: { ejections: r.ejections, until: r.ejectedUntil > now ? iso(r.ejectedUntil) : null, lastAt: iso(r.lastEjectedAt) },
        downSince: iso(r.downSince),
        drain: drainView(r.drain),
        models: r.models ? [...r.models] : null,
        adapters: Object.fromEntries(r.adapters),
        // LoRA slots as last scraped (vllm:lora_requests_info); null when the replica reports none.
        lora: r.lora === null ? null : { maxLoras: r.lora.maxLoras, running: [...r.lora.running], waiting: [...r.lora.waiting], free: Math.max(0, r.lora.maxLoras - r.lora.running.size) },
        // Adapters of adapters.sources there or on their way: loaded, loading, unloading, in flight, last used.
        managedAdapters: deps.managedAdapters?.(r.name) ?? [],
        // The fleet configuration audit: what the replica reports, and where it differs from the rest.
        config: r.config,
        configMismatch: r.configMismatch,
        lastError: r.lastError,
        lastErrorAt: iso(r.lastErrorAt),
      })),
    };
  });
  // Drain: no new sessions, in-flight streams finish, pinned sessions handed off warm. Undrain
  // takes it back. (An admin token, once there is one, guards every /admin/* route.)
  for (const verb of ['drain', 'undrain'] as const) {
    const what = verb === 'drain' ? 'drain a replica: no new sessions, pinned ones handed off warm' : 'take a drained replica back';
    app.post<{ Params: { name: string } }>(`/admin/replicas/:name/${verb}`, doc(what), async (req, reply) => {
      const ok = deps.drains?.[verb](req.params.name) ?? false;
      if (!ok) return sendError(reply, errors.replicaNotFound([], 'name'));
      const r = registry.byName(req.params.name)!;
      return reply.code(202).send({ name: r.name, state: stateOf(r, Date.now()), drain: drainView(r.drain) });
    });
  }
  app.get('/admin/routing', doc('what routing has learnt: prefix index, token scale, cost model per replica'), async () => {
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
  /**
   * A session by its key, or by the tag a log line shows: `session` (a keyed session) or
   * `conversation` (a keyless one, whose placement key no header or line carries).
   */
  function findSession(param: string): { storeKey: string; key: string; tag: string | null; keyless: boolean } {
    if (router.session(param) !== null || !looksLikeTag(param)) return { storeKey: param, key: param, tag: null, keyless: false };
    const found = deps.sessionByTag?.(param);
    return found ? { ...found, tag: param } : { storeKey: param, key: param, tag: null, keyless: false };
  }
  app.get<{ Params: { key: string } }>('/admin/sessions/:key', doc('a session by its key or its log tag: pin, last drift, last turns'), async (req, reply) => {
    const { storeKey, key, tag, keyless } = findSession(req.params.key);
    const s = router.session(storeKey);
    const d = router.lastDrift(key);
    const t = deps.turns?.lastTurns(key) ?? null;
    if (!s && !d && !t) return sendError(reply, errors.sessionNotFound([], 'key'));
    const lastDrift = d === null ? null : { where: d.where, message: d.message, at: new Date(d.at).toISOString() };
    const turns = t === null ? null : { open: t.open, last: t.turns };
    const times = s ? { since: new Date(s.since).toISOString(), lastSeen: new Date(s.lastSeen).toISOString() } : {};
    // A keyless conversation's placement key is the gateway's own hash: it is not the caller's to see.
    if (keyless) return { tag, keyless: true, replica: s?.replica ?? null, warmTokens: s?.warmTokens ?? null, ...times, lastDrift, turns };
    const shown = tag === null ? {} : { tag };
    return s ? { ...s, ...shown, ...times, lastDrift, turns } : { key, ...shown, replica: null, lastDrift, turns };
  });
  app.delete<{ Params: { key: string } }>('/admin/sessions/:key', doc('forget a session (its pin and turns), by key or log tag'), async (req, reply) => {
    const { storeKey, key } = findSession(req.params.key);
    const removed = router.unpin(storeKey);
    // What the gateway knows of the session goes with its pin: its turns too.
    const forgot = deps.turns?.forget(key) ?? false;
    if (!removed && !forgot) return sendError(reply, errors.sessionNotFound([], 'key'));
    return reply.code(200).send({ unpinned: removed });
  });
  app.get<{ Params: { id: string } }>('/admin/responses/:id', doc('which replica stores a Responses API response'), async (req, reply) => {
    const r = router.storedResponse(req.params.id);
    if (!r) return sendError(reply, errors.responseNotFound([], 'id'));
    return { id: r.key, replica: r.replica, storedAt: new Date(r.since).toISOString(), lastSeen: new Date(r.lastSeen).toISOString() };
  });
  return app;
}
