import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Agent } from 'undici';
import { buildAdmin } from './admin/routes.js';
import { deepFreeze, performanceWarnings } from './config/load.js';
import type { ResolvedConfig } from './config/schema.js';
import { createDataPlaneServer } from './edge/listener.js';
import { errors } from './errors.js';
import { createKeyring } from './edge/api-keys.js';
import { createPipeline } from './edge/pipeline.js';
import type { AddressResolver } from './fleet/discovery.js';
import { createFleet, type Fleet } from './fleet/fleet.js';
import type { Health } from './fleet/health.js';
import { createRegistry, type Registry } from './fleet/registry.js';
import { identityOptionsOf } from './identify/identity.js';
import { createAdmission } from './queue/admission.js';
import { createLimiter } from './queue/limiter.js';
import { createRecorder } from './record/record.js';
import { createTurns } from './record/turns.js';
import { createRouter } from './routing/router.js';
import { ROUTE_REASONS, STATE_LOST_REASONS, type ResidencyObserver, type Router, type StateLostReason } from './routing/types.js';
import { createMemorySessionStore } from './store/memory.js';
import { createRedisSessionStore } from './store/redis.js';
import { createSharedDrains } from './store/redis-drains.js';
import type { SessionStore } from './store/types.js';
import { createLogger } from './telemetry/logger.js';
import { createMetrics, type Metrics } from './telemetry/metrics.js';
import { createSessionTagger } from './telemetry/session-tag.js';
import { throttle } from './telemetry/throttle.js';
import { createUpstreamAgent, tlsByOrigin } from './upstream/agent.js';
import { zeroKnownSeries } from './known-series.js';

export interface GatewayDeps {
  log?: Logger;
  store?: SessionStore;
  /** Stored-response records (Responses API); default: Redis under `<keyPrefix>resp:` when configured, else memory. */
  responseStore?: SessionStore;
  /** Default-process metrics (GC, event loop); off in tests that run many gateways. */
  defaultMetrics?: boolean;
  /** DNS for dns:// upstreams (tests); otherwise node's resolver with discovery.servers. */
  resolver?: AddressResolver;
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

/** Keys a reload cannot change in a running gateway: listeners, the session store, the strategy, bounds sized at start. */
const FIXED_AT_START = [
  'listen', 'admin', 'auth', 'redis', 'logging.sessionTagSecret', 'routing.strategy', 'routing.maxSessions', 'routing.sessionTtlMs',
  'routing.options.prefixMaxEntries', 'routing.options.prefixTtlMs', 'routing.options.prior',
  'routing.options.costForgetting', 'routing.options.trafficHalfLifeMs', 'responses', 'timeouts.connectMs',
  'handoff.maxTotalBytes', 'handoff.maxPromptBytes', 'warmup.maxBytes',
] as const;

type Tree = Record<string, unknown>;
const at = (c: ResolvedConfig, path: string): unknown => path.split('.').reduce<unknown>((v, k) => (v as Tree)[k], c);

/** The reloaded configuration as it applies: `next`, with every setting fixed at start kept as it runs. */
function asApplied(next: ResolvedConfig, running: ResolvedConfig): ResolvedConfig {
  const applied = structuredClone(next) as unknown as Tree;
  for (const path of FIXED_AT_START) {
    const keys = path.split('.');
    const parent = keys.slice(0, -1).reduce<Tree>((v, k) => v[k] as Tree, applied);
    parent[keys[keys.length - 1]] = at(running, path);
  }
  return deepFreeze(applied) as unknown as ResolvedConfig;
}

const admissionLimitsOf = (c: ResolvedConfig) => ({ maxInflight: c.limits.maxInflightPerReplica, maxQueued: c.limits.maxQueuedPerReplica, timeoutMs: c.timeouts.queueMs });
const globalLimitOf = (c: ResolvedConfig) => ({ max: c.limits.maxConcurrent, maxQueued: c.limits.maxQueued, timeoutMs: c.timeouts.queueMs, what: 'gateway' });

/** The composition root: every part of the gateway built once, from the configuration. */
export function buildGateway(config: ResolvedConfig, deps: GatewayDeps = {}): Gateway {
  const log = deps.log ?? createLogger(config.logging.level);
  const metrics = createMetrics({ defaultMetrics: deps.defaultMetrics });
  for (const reason of ROUTE_REASONS) metrics.decisions.inc({ reason }, 0);
  for (const result of ['applied', 'rejected']) metrics.configReloads.inc({ result }, 0);
  const known = zeroKnownSeries(metrics);
  const registry = createRegistry(config.upstreams);
  const store = deps.store ?? (config.redis.url
    ? createRedisSessionStore({ url: config.redis.url, keyPrefix: config.redis.keyPrefix, maxSessions: config.routing.maxSessions, ttlMs: config.routing.sessionTtlMs, metrics, log })
    : createMemorySessionStore({ maxSessions: config.routing.maxSessions, ttlMs: config.routing.sessionTtlMs }));
  // A second SessionStore, of response id → replica: bounded, TTL'd and shared like the pins, under
  // its own key prefix and channel.
  const rc = config.responses;
  const responseStore = deps.responseStore ?? (config.redis.url
    ? createRedisSessionStore({ url: config.redis.url, store: 'responses', keyPrefix: `${config.redis.keyPrefix}resp:`, maxSessions: rc.maxRecords, ttlMs: rc.recordTtlMs, metrics, log })
    : createMemorySessionStore({ maxSessions: rc.maxRecords, ttlMs: rc.recordTtlMs }));
  // A local store is always there; a shared one reports its own connection.
  if (!config.redis.url) for (const s of ['sessions', 'responses']) metrics.storeUp.set({ store: s }, 1);
  for (const reason of STATE_LOST_REASONS) metrics.stateLost.inc({ reason }, 0);
  const lostWarning = throttle(10_000);
  const onStateLost = (reason: StateLostReason, replica: string | null) => {
    metrics.stateLost.inc({ reason });
    const suppressed = lostWarning();
    if (suppressed === null) return;
    const asUsual = reason === 'unknown' || reason === 'unconfirmed';
    log.warn({ reason, replica, action: asUsual ? 'routed as usual' : rc.onLostState, suppressed },
      reason === 'unknown'
        ? 'stored response unknown to this gateway and the shared store: routed as usual, the replica may not hold it'
        : reason === 'unconfirmed'
          ? 'stored response not in this gateway\'s view and the shared store did not answer in time (responses.fetchMs): routed as usual'
          : 'stored response lost with its replica');
  };
  const residency: ResidencyObserver = {
    cachedTokens(replica, predicted, served) {
      metrics.cachedPredicted.inc({ replica }, predicted);
      metrics.cachedPredictedServed.inc({ replica }, served);
      if (predicted > served) metrics.cachedOverpredicted.inc({ replica }, predicted - served);
    },
    evicted: (replica, source, links) => metrics.residencyEvictions.inc({ replica, source }, links),
    learned: (replica, outcome) => metrics.kvBlockMapping.inc({ replica, outcome }),
  };
  const router = createRouter(config.routing.strategy, { store, options: config.routing.options, responses: { store: responseStore, onLostState: rc.onLostState, onStateLost, fetchMs: rc.fetchMs }, residency, kvMaxBlocks: config.kvEvents.maxBlocksPerReplica });
  // Read when a replica's connection pool is made, on its first request: a reload adds to it.
  const tls = tlsByOrigin(config.upstreams);
  const agent = createUpstreamAgent({ connectTimeoutMs: config.timeouts.connectMs, tlsByOrigin: tls });
  const admission = createAdmission(admissionLimitsOf(config));
  const fleet = createFleet({ config, registry, router, store, agent, metrics, log, resolver: deps.resolver, forgetAdmission: admission.forget });
  const { health } = fleet;

  let draining = false;
  const isDraining = () => draining;
  const open = new Set<Promise<unknown>>();

  const keyring = createKeyring({ keys: config.auth.apiKeys, file: config.auth.apiKeysFile, log, metrics });
  const globalLimit = createLimiter(globalLimitOf(config));
  // Through a shared store, caller turns are counted once whichever gateways serve their calls.
  const turns = createTurns(config.turns, metrics, store.turns);
  // Read per request: a reload replaces `config` and `identity` here.
  const pipeline = {
    keyring, globalLimit,
    agent, admission, health, metrics, config, registry, router, log,
    byName: registry.byName,
    recorder: createRecorder({ metrics, log, router, sessionTag: createSessionTagger(config.logging.sessionTagSecret), turns }),
    identity: identityOptionsOf(config),
    draining: isDraining,
    track(p: Promise<unknown>) {
      open.add(p);
      void p.finally(() => open.delete(p));
    },
    served: fleet.served,
  };
  const handle = createPipeline(pipeline);
  const server = createDataPlaneServer(handle);
  // Routing state as gauges, computed when Prometheus scrapes rather than per request.
  const zeroed = new Set<string>();
  const beforeScrape = () => {
    const pins = router.pinsByReplica();
    const t = Date.now();
    // Replicas that left: zeroed again should they come back (their series are removed, fleet/membership.ts).
    if (zeroed.size > registry.replicas.length) for (const name of zeroed) if (registry.byName(name) === undefined) zeroed.delete(name);
    for (const r of registry.replicas) {
      // Every replica's failure series exist from its first scrape at 0, so rate() sees a first burst.
      if (!zeroed.has(r.name)) {
        zeroed.add(r.name);
        known.replica(r.name);
      }
      metrics.sessionsPinned.set({ replica: r.name }, pins.get(r.name) ?? 0);
      metrics.inflight.set({ replica: r.name }, r.inflight);
      metrics.queued.set({ replica: r.name }, admission.queuedOn(r.name));
      metrics.scrapeAge.set({ replica: r.name }, r.lastScrapeAt === null ? -1 : (t - r.lastScrapeAt) / 1000);
      metrics.kvCapacity.set({ replica: r.name }, r.kvCapacityTokens ?? -1);
    }
    metrics.globalInflight.set(globalLimit.open);
    metrics.globalQueued.set(globalLimit.queued);
    const st = router.stats();
    metrics.prefixEntries.set(st.prefixEntries);
    metrics.responseRecords.set(st.responseRecords);
    for (const [replica, ms] of st.retentionByReplica) if (registry.byName(replica)) metrics.retention.set({ replica }, ms / 1000);
    for (const [replica, kb] of st.kvBlocksByReplica) if (registry.byName(replica)) metrics.kvBlocks.set({ replica }, kb.blocks);
    // Placement's own estimate (routing/working-set.ts): each agent's shared prompt once plus the
    // sessions active there recently, in the replica's tokens; 0 until its capacity is scraped.
    for (const r of registry.replicas) metrics.workingSet.set({ replica: r.name }, Math.round(st.workingSetTokensByReplica.get(r.name) ?? 0));
  };
  // With Redis, a drain by hand through any gateway reaches every gateway (the one it reached
  // hands the sessions off; the others stop placing there).
  const shared = config.redis.url === null ? null : createSharedDrains({
    url: config.redis.url, keyPrefix: config.redis.keyPrefix, metrics, log,
    apply: (name, d) => { if (d) fleet.drains.drain(name, 'shared', false); else fleet.drains.undrain(name); },
  });
  const drains = shared === null ? fleet.drains : {
    drain(name: string) { const ok = fleet.drains.drain(name); if (ok) shared.set(name, true); return ok; },
    undrain(name: string) { const ok = fleet.drains.undrain(name); if (ok) shared.set(name, false); return ok; },
  };
  const admin = buildAdmin({ registry, router, metrics, draining: isDraining, beforeScrape, token: config.admin.token, drains, turns });

  for (const w of performanceWarnings(config)) log.warn({ setting: true }, w);
  if (config.logging.sessionTagSecret === null) {
    log.warn({ setting: 'logging.sessionTagSecret' }, 'no session tag secret configured (WARMROUTE_SESSION_TAG_SECRET): one was drawn at start, so session tags in logs correlate within this process only; give every gateway the same secret');
  }

  const urlOf = (a: AddressInfo) => {
    const host = a.family === 'IPv6' ? `[${a.address}]` : a.address;
    return `http://${host === '0.0.0.0' || host === '[::]' ? '127.0.0.1' : host}:${a.port}`;
  };

  return {
    server, admin, registry, router, metrics, health, fleet, store, responseStore, agent, log,
    draining: isDraining,
    reconfigure(next) {
      // Read first: a CA file gone since the config was loaded throws before anything is applied.
      const nextTls = tlsByOrigin(next.upstreams);
      const fixed = FIXED_AT_START.filter((path) => JSON.stringify(at(next, path)) !== JSON.stringify(at(pipeline.config, path)));
      if (fixed.length) log.warn({ keys: fixed }, 'config reload: these settings apply only at start; the running values stay');
      // A replica the reload adds connects with its TLS settings; one already connected keeps those
      // it connected with.
      for (const [origin, t] of nextTls) if (!tls.has(origin)) tls.set(origin, t);
      const applied = asApplied(next, pipeline.config);
      router.setOptions(applied.routing.options);
      admission.setLimits(admissionLimitsOf(applied));
      globalLimit.configure(globalLimitOf(applied));
      turns.setOptions(applied.turns);
      fleet.reconfigure(applied);
      pipeline.config = applied;
      pipeline.identity = identityOptionsOf(applied);
      log.level = applied.logging.level;
      metrics.configReloads.inc({ result: 'applied' });
      log.warn({ replicas: next.upstreams.map((u) => u.name) }, 'config reloaded');
    },
    async listen() {
      await Promise.all([store, responseStore].map((s) => (s.ready ? waitReady(s.ready(), log) : undefined)));
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
      log.info({ open: open.size, drainMs: pipeline.config.timeouts.drainMs }, 'draining: no new requests, waiting for open streams');
      const closed = new Promise<void>((r) => server.close(() => r()));
      server.closeIdleConnections();
      const drained = Promise.allSettled([...open]);
      let timer: NodeJS.Timeout | undefined;
      const timedOut = await Promise.race([
        drained.then(() => false),
        new Promise<boolean>((r) => { timer = setTimeout(() => r(true), pipeline.config.timeouts.drainMs); }),
      ]);
      clearTimeout(timer);
      if (timedOut) log.warn({ open: open.size }, 'drain timeout: closing the remaining streams');
      // Every exchange is over (or out of time): what is left are keep-alive connections that
      // went idle after close() began; they would otherwise hold the process for keepAliveTimeout.
      server.closeAllConnections();
      await closed;
      await admin.close();
      await agent.close().catch(() => agent.destroy());
      await Promise.all([store.close(), responseStore.close(), shared?.close()]);
      keyring.close();
      turns.close();
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
