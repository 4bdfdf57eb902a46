import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Agent } from 'undici';
import { buildAdmin, isLoopbackHost } from './admin/routes.js';
import { createSessionLookup } from './admin/session-lookup.js';
import { performanceWarnings } from './config/load.js';
import type { ResolvedConfig } from './config/schema.js';
import { createDataPlaneServer } from './edge/listener.js';
import { errors } from './errors.js';
import { createKeyring } from './edge/api-keys.js';
import { createPipeline } from './edge/pipeline.js';
import { createRealtime, type Realtime } from './edge/realtime.js';
import { createRealtimeRecorder } from './record/realtime.js';
import { createVoiceTurns } from './record/voice-turns.js';
import type { AddressResolver } from './fleet/discovery.js';
import { createFleet, type Fleet } from './fleet/fleet.js';
import { createAdapterDirectory, mergedSources } from './fleet/adapter-directory.js';
import { createAdapterLoader } from './fleet/adapter-loader.js';
import { sharePeerInflight } from './fleet/peer-inflight.js';
import { ACTIVITY_FLUSH_MS } from './store/redis-activity.js';
import type { Health } from './fleet/health.js';
import { createRegistry, type Registry } from './fleet/registry.js';
import { identityOptionsOf } from './identify/identity.js';
import { createAdmission, reservedSlots } from './queue/admission.js';
import { createLimiter } from './queue/limiter.js';
import { createRecorder } from './record/record.js';
import { createTurns } from './record/turns.js';
import { createRouter } from './routing/router.js';
import { createAdapterVersions } from './routing/adapter-versions.js';
import { ROUTE_REASONS, type Router } from './routing/types.js';
import { createMemorySessionStore } from './store/memory.js';
import { createRedisSessionStore } from './store/redis.js';
import { createSharedDrains } from './store/redis-drains.js';
import type { SessionStore } from './store/types.js';
import { createLogger } from './telemetry/logger.js';
import { createMetrics, type Metrics } from './telemetry/metrics.js';
import { createSessionTagger } from './telemetry/session-tag.js';
import { createUpstreamAgent, tlsByOrigin } from './upstream/agent.js';
import { zeroKnownSeries } from './known-series.js';
import { createReload } from './reload.js';
import { residencyObserver, stateLostObserver } from './router-observers.js';
import { createScrapeGauges } from './scrape-gauges.js';
import type { SpanExporter } from '@opentelemetry/sdk-trace';
import { createTracing } from './telemetry/tracing/tracing.js';
import { tracingSettings } from './telemetry/tracing/settings.js';

export interface GatewayDeps {
  log?: Logger;
  store?: SessionStore;
  /** Stored-response records (Responses API); default: Redis under `<keyPrefix>resp:` when configured, else memory. */
  responseStore?: SessionStore;
  /** Default-process metrics (GC, event loop); off in tests that run many gateways. */
  defaultMetrics?: boolean;
  /** DNS for dns:// upstreams (tests); otherwise node's resolver with discovery.servers. */
  resolver?: AddressResolver;
  /** The OTEL_* variables tracing reads; default process.env. */
  env?: Readonly<Record<string, string | undefined>>;
  /** Tests: where spans go (tracing on) instead of the OTLP/HTTP exporter. */
  traceExporter?: SpanExporter;
}

export interface Gateway {
  readonly server: Server;
  readonly admin: FastifyInstance;
  readonly registry: Registry;
  readonly router: Router;
  readonly metrics: Metrics;
  readonly health: Health;
  readonly fleet: Fleet;
  readonly store: SessionStore;
  readonly responseStore: SessionStore;
  readonly agent: Agent;
  readonly log: Logger;
  /** Realtime transcription connections (/v1/realtime). */
  readonly realtime: Realtime;
  /** Probes the fleet once, then listens on both ports; returns the bound addresses. */
  listen(): Promise<{ url: string; adminUrl: string }>;
  /** Stops taking requests, lets open exchanges finish (up to drainMs), then closes everything. */
  close(): Promise<void>;
  readonly draining: () => boolean;
  /**
   * A reloaded configuration (SIGHUP, file change), already validated: replicas added or removed,
   * limits, timeouts, routing options, fleet settings, log level. Open streams are untouched.
   * Settings that only apply at start are named in a warning.
   */
  reconfigure(next: ResolvedConfig): void;
}

const admissionLimitsOf = (c: ResolvedConfig) => ({ maxInflight: c.limits.maxInflightPerReplica, maxQueued: c.limits.maxQueuedPerReplica, timeoutMs: c.timeouts.queueMs, reservedShare: c.limits.reservedInteractiveShare, batchPrefill: c.limits.batchPrefillPerReplica });
const globalLimitOf = (c: ResolvedConfig) => ({ max: c.limits.maxConcurrent, maxQueued: c.limits.maxQueued, timeoutMs: c.timeouts.queueMs, what: 'gateway', reserved: reservedSlots(c.limits.maxConcurrent, c.limits.reservedInteractiveShare) });

/** The composition root: every part of the gateway built once, from the configuration. */
export function buildGateway(config: ResolvedConfig, deps: GatewayDeps = {}): Gateway {
  const log = deps.log ?? createLogger(config.logging.level, undefined, config.logging.format);
  const metrics = createMetrics({ defaultMetrics: deps.defaultMetrics });
  for (const reason of ROUTE_REASONS) metrics.decisions.inc({ reason }, 0);
  for (const result of ['applied', 'rejected']) metrics.configReloads.inc({ result }, 0);
  // A replica's retention starts as the prefix TTL routing assumes (pipeline.config: the running one).
  const known = zeroKnownSeries(metrics, () => pipeline.config.routing.options.prefixTtlMs / 1000);
  const registry = createRegistry(config.upstreams);
  // One tagger: the access line's tags and the admin API's lookup by tag must agree.
  const sessionTag = createSessionTagger(config.logging.sessionTagSecret);
  const store = deps.store ?? (config.redis.url
    ? createRedisSessionStore({ url: config.redis.url, keyPrefix: config.redis.keyPrefix, maxSessions: config.routing.maxSessions, ttlMs: config.routing.sessionTtlMs, metrics, log })
    : createMemorySessionStore({ maxSessions: config.routing.maxSessions, ttlMs: config.routing.sessionTtlMs }));
  // A second SessionStore, of response id → replica: bounded, TTL'd and shared like the pins, under
  // its own key prefix and channel.
  const rc = config.responses;
  const responseStore = deps.responseStore ?? (config.redis.url
    ? createRedisSessionStore({ url: config.redis.url, store: 'responses', keyPrefix: `${config.redis.keyPrefix}resp:`, maxSessions: rc.maxRecords, ttlMs: rc.recordTtlMs, metrics, log })
    : createMemorySessionStore({ maxSessions: rc.maxRecords, ttlMs: rc.recordTtlMs }));
  // A session's adapter version of each rolled-out client model (adapters.versions), shared like
  // the pins under its own prefix; a Redis connection of its own only when versions are configured at start.
  const versionStore = config.redis.url && Object.keys(config.adapters.versions).length > 0
    ? createRedisSessionStore({ url: config.redis.url, store: 'versions', keyPrefix: `${config.redis.keyPrefix}ver:`, maxSessions: config.routing.maxSessions, ttlMs: config.routing.sessionTtlMs, metrics, log })
    : createMemorySessionStore({ maxSessions: config.routing.maxSessions, ttlMs: config.routing.sessionTtlMs });
  const versions = createAdapterVersions({ store: versionStore, versions: config.adapters.versions, fetchMs: rc.fetchMs });
  // A local store is always there; a shared one reports its own connection.
  if (!config.redis.url) for (const s of ['sessions', 'responses']) metrics.storeUp.set({ store: s }, 1);
  const onStateLost = stateLostObserver(metrics, log, rc.onLostState);
  const residency = residencyObserver(metrics);
  const router = createRouter(config.routing.strategy, { store, options: config.routing.options, responses: { store: responseStore, onLostState: rc.onLostState, onStateLost, fetchMs: rc.fetchMs }, residency, kvMaxBlocks: config.kvEvents.maxBlocks });
  // Read when a replica's connection pool is made, on its first request: a reload adds to it.
  const tls = tlsByOrigin(config.upstreams);
  const agent = createUpstreamAgent({ connectTimeoutMs: config.timeouts.connectMs, tlsByOrigin: tls });
  const admission = createAdmission(admissionLimitsOf(config), (replica) => metrics.batchPrefillWaits.inc({ replica }));
  const fleet = createFleet({ config, registry, router, store, agent, metrics, log, resolver: deps.resolver, forgetAdmission: admission.forget });
  const { health } = fleet;
  // Every gateway's open requests in every gateway's load bounds, when they share a store.
  const announceInflight = store.announceInflight?.bind(store);
  const onPeerInflight = store.onPeerInflight?.bind(store);
  const peerInflight = announceInflight && onPeerInflight ? sharePeerInflight({
    store: { announceInflight, onPeerInflight }, own: () => registry.replicas, now: Date.now, intervalMs: ACTIVITY_FLUSH_MS,
    apply: (name, n) => { const r = registry.byName(name); if (r !== undefined) r.peerInflight = n; },
    later: (fn, ms) => void setTimeout(fn, ms).unref(),
  }) : null;
  const adapters = createAdapterLoader({ registry, agent, metrics, log, options: config.adapters, readModels: (r) => health.readModels(r), sentAt: (replica, adapter) => router.adapterSentAt(replica, adapter) });
  // adapters.directory's adapters join adapters.sources in the loader as they are listed.
  let adaptersConfig = config.adapters;
  const directory = createAdapterDirectory({ options: config.adapters, log, metrics, changed: (listed) => adapters.setOptions(mergedSources(adaptersConfig, listed)) });

  let draining = false;
  const isDraining = () => draining;
  // Open exchanges, counted (not a promise each): the drain waits for the count to reach zero.
  const open = { count: 0, idle: null as (() => void) | null };

  const keyring = createKeyring({ keys: config.auth.apiKeys, file: config.auth.apiKeysFile, log, metrics });
  const globalLimit = createLimiter(globalLimitOf(config));
  // Through a shared store, caller turns are counted once whichever gateways serve their calls.
  const turns = createTurns(config.turns, metrics, store.turns);
  const traced = tracingSettings(config.tracing, deps.env ?? process.env);
  const tracing = traced === null ? null : createTracing(traced, { log, metrics, exporter: deps.traceExporter });
  if (traced !== null) log.info({ url: traced.url, protocol: traced.protocol, sampler: traced.sampler, samplerArg: traced.samplerArg, serviceName: traced.serviceName }, 'tracing on');
  // A caller's end of speech on a realtime connection, joined to the reply's first token.
  const voice = createVoiceTurns({ maxSessions: config.turns.maxSessions, maxAgeMs: config.turns.idleMs });
  // Read per request: a reload replaces `config` and `identity` here.
  const pipeline = {
    keyring, globalLimit,
    agent, admission, health, metrics, config, registry, router, log,
    byName: registry.byName,
    tracing,
    adapters,
    versions,
    recorder: createRecorder({ metrics, log, router, sessionTag, turns, voice, adapterTopN: (): number => pipeline.config.adapters.metricsTopN }),
    identity: identityOptionsOf(config),
    draining: isDraining,
    exchangeOpened() { open.count++; },
    exchangeClosed() {
      if (--open.count === 0 && open.idle !== null) open.idle();
    },
    served: fleet.served,
  };
  const handle = createPipeline(pipeline);
  const server = createDataPlaneServer(handle);
  const realtime = createRealtime({
    registry, store, keyring, metrics, log, voice, tracing, tls: (origin) => tls.get(origin),
    recorder: createRealtimeRecorder({ metrics, log, sessionTag }),
    config: () => pipeline.config, identity: () => pipeline.identity, draining: isDraining,
    exchangeOpened: () => pipeline.exchangeOpened(), exchangeClosed: () => pipeline.exchangeClosed(),
  });
  server.on('upgrade', realtime.upgrade);
  const beforeScrape = createScrapeGauges({ metrics, known, registry, router, admission, globalLimit });
  // With Redis, a drain by hand through any gateway reaches every gateway (the one it reached
  // hands the sessions off; the others stop placing there).
  const shared = config.redis.url === null ? null : createSharedDrains({
    url: config.redis.url, keyPrefix: config.redis.keyPrefix, metrics, log,
    apply: (name, d) => { if (d) fleet.drains.drain(name, 'shared', false); else fleet.drains.undrain(name); },
    draining: (name) => registry.byName(name)?.draining ?? null,
  });
  const drains = shared === null ? fleet.drains : {
    drain(name: string) { const ok = fleet.drains.drain(name); if (ok) shared.set(name, true); return ok; },
    undrain(name: string) { const ok = fleet.drains.undrain(name); if (ok) shared.set(name, false); return ok; },
  };
  // A reload: each part takes the applied configuration through its own reconfigure.
  const reconfigure = createReload({
    log, metrics, tls, running: () => pipeline.config,
    parts: [
      (c) => router.setOptions(c.routing.options),
      (c) => admission.setLimits(admissionLimitsOf(c)),
      (c) => globalLimit.configure(globalLimitOf(c)),
      (c) => turns.setOptions(c.turns),
      (c) => fleet.reconfigure(c),
      (c) => {
        adaptersConfig = c.adapters;
        adapters.setOptions(mergedSources(c.adapters, directory.listed()));
        void directory.setOptions(c.adapters);
      },
      (c) => versions.setVersions(c.adapters.versions),
      (c) => realtime.reconfigure(c),
      (c) => {
        pipeline.config = c;
        pipeline.identity = identityOptionsOf(c);
        log.level = c.logging.level;
      },
    ],
  });
  const admin = buildAdmin({ registry, router, metrics, draining: isDraining, beforeScrape, token: config.admin.token, loopbackListener: isLoopbackHost(config.admin.host), drains, turns, sessionByTag: createSessionLookup({ store, tag: sessionTag }), managedAdapters: adapters.view });

  for (const w of performanceWarnings(config)) log.warn({ setting: true }, w);
  // A secret drawn at start only breaks something where gateways share sessions (Redis): there the
  // same session gets a different tag on each pod. A single gateway's tags correlate as they are.
  if (config.logging.sessionTagSecret === null && config.redis.url !== null) {
    log.warn({ setting: 'logging.sessionTagSecret' }, 'gateways share sessions through Redis but no session tag secret is configured (WARMROUTE_SESSION_TAG_SECRET): each gateway drew its own, so one session shows a different tag on each; give every gateway the same secret');
  }

  const urlOf = (a: AddressInfo) => {
    const host = a.family === 'IPv6' ? `[${a.address}]` : a.address;
    return `http://${host === '0.0.0.0' || host === '[::]' ? '127.0.0.1' : host}:${a.port}`;
  };

  return {
    server, admin, registry, router, metrics, health, fleet, store, responseStore, agent, log, realtime,
    draining: isDraining,
    reconfigure,
    async listen() {
      await Promise.all([store, responseStore, versionStore].map((s) => (s.ready ? waitReady(s.ready(), log) : undefined)));
      await directory.scan();
      await fleet.init();
      fleet.start();
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(config.listen.port, config.listen.host, () => { server.off('error', reject); resolve(); });
      });
      await admin.listen({ host: config.admin.host, port: config.admin.port });
      const urls = { url: urlOf(server.address() as AddressInfo), adminUrl: urlOf(admin.server.address() as AddressInfo) };
      log.info({ ...urls, strategy: router.strategy, replicas: registry.replicas.map((r) => ({ name: r.name, up: r.up })) }, 'warmroute listening');
      return urls;
    },
    async close() {
      if (draining) return;
      draining = true;
      metrics.draining.set(1);
      // Requests waiting for the gateway-wide limit would be admitted after the drain began and
      // cut when it ends: each is answered 503 shutting_down now, so its client retries elsewhere.
      // So are those waiting for a replica's slot (limits.maxInflightPerReplica).
      const shuttingDown = errors.shuttingDown([], null, undefined, ['retry-after', '1']);
      globalLimit.closeQueue(shuttingDown);
      admission.closeQueues(shuttingDown);
      fleet.stop();
      log.info({ open: open.count, drainMs: pipeline.config.timeouts.drainMs }, 'draining: no new requests, waiting for open streams');
      const closed = new Promise<void>((r) => server.close(() => r()));
      server.closeIdleConnections();
      const drained = open.count === 0 ? Promise.resolve() : new Promise<void>((r) => { open.idle = r; });
      let timer: NodeJS.Timeout | undefined;
      const timedOut = await Promise.race([
        drained.then(() => false),
        new Promise<boolean>((r) => { timer = setTimeout(() => r(true), pipeline.config.timeouts.drainMs); }),
      ]);
      clearTimeout(timer);
      open.idle = null;
      if (timedOut) log.warn({ open: open.count }, 'drain timeout: closing the remaining streams');
      // Realtime connections still open are closed with 1001 (their sockets are the server's until then).
      await realtime.closeAll();
      // Every exchange is over (or out of time): what is left are keep-alive connections that
      // went idle after close() began; they would otherwise hold the process for keepAliveTimeout.
      server.closeAllConnections();
      await closed;
      await admin.close();
      await agent.close().catch(() => agent.destroy());
      peerInflight?.close();
      await Promise.all([store.close(), responseStore.close(), versionStore.close(), shared?.close()]);
      keyring.close();
      directory.stop();
      turns.close();
      // Spans still queued are sent (bounded by the exporter's timeout); a collector that is down only costs that wait.
      await tracing?.shutdown().catch(() => undefined);
      log.info('closed');
    },
  };
}

const STORE_READY_TIMEOUT_MS = 2_000;

/** A shared store that is down must not keep the gateway from serving: wait a little, then go on loudly. */
async function waitReady(ready: Promise<void>, log: Logger): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const ok = await Promise.race([
    ready.then(() => true, () => false),
    new Promise<boolean>((r) => { timer = setTimeout(() => r(false), STORE_READY_TIMEOUT_MS); }),
  ]);
  clearTimeout(timer);
  if (!ok) log.warn({ waitedMs: STORE_READY_TIMEOUT_MS }, 'session store not reachable at start: routing from local state until it is');
}
