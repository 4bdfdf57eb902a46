import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Agent } from 'undici';
import { buildAdmin } from './admin/routes.js';
import { performanceWarnings } from './config/load.js';
import type { ResolvedConfig } from './config/schema.js';
import { createDataPlaneServer } from './edge/listener.js';
import { createPipeline } from './edge/pipeline.js';
import type { AddressResolver } from './fleet/discovery.js';
import { createFleet, type Fleet } from './fleet/fleet.js';
import type { Health } from './fleet/health.js';
import { createRegistry, type Registry } from './fleet/registry.js';
import { identityOptionsOf } from './identify/identity.js';
import { createAdmission } from './queue/admission.js';
import { createRecorder } from './record/record.js';
import { createRouter } from './routing/router.js';
import { ROUTE_REASONS, type Router } from './routing/types.js';
import { createMemorySessionStore } from './store/memory.js';
import { createRedisSessionStore } from './store/redis.js';
import type { SessionStore } from './store/types.js';
import { createLogger } from './telemetry/logger.js';
import { createMetrics, type Metrics } from './telemetry/metrics.js';
import { createUpstreamAgent, tlsByOrigin } from './upstream/agent.js';

export interface GatewayDeps {
  log?: Logger;
  store?: SessionStore;
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
const FIXED_AT_START: ((c: ResolvedConfig) => unknown)[] = [
  (c) => c.listen, (c) => c.admin, (c) => c.redis, (c) => c.routing.strategy, (c) => c.routing.maxSessions,
  (c) => c.routing.sessionTtlMs, (c) => c.routing.options.prefixMaxEntries, (c) => c.routing.options.prefixTtlMs,
  (c) => c.routing.options.prior, (c) => c.timeouts.connectMs, (c) => c.handoff.maxTotalBytes, (c) => c.handoff.maxPromptBytes, (c) => c.warmup.maxBytes,
];
const FIXED_NAMES = ['listen', 'admin', 'redis', 'routing.strategy', 'routing.maxSessions', 'routing.sessionTtlMs', 'routing.options.prefixMaxEntries', 'routing.options.prefixTtlMs', 'routing.options.prior', 'timeouts.connectMs', 'handoff.maxTotalBytes', 'handoff.maxPromptBytes', 'warmup.maxBytes'];

/** The composition root: every part of the gateway built once, from the configuration. */
export function buildGateway(config: ResolvedConfig, deps: GatewayDeps = {}): Gateway {
  const log = deps.log ?? createLogger(config.logging.level);
  const metrics = createMetrics({ defaultMetrics: deps.defaultMetrics });
  for (const reason of ROUTE_REASONS) metrics.decisions.inc({ reason }, 0);
  for (const result of ['applied', 'rejected']) metrics.configReloads.inc({ result }, 0);
  const registry = createRegistry(config.upstreams);
  const store = deps.store ?? (config.redis.url
    ? createRedisSessionStore({ url: config.redis.url, keyPrefix: config.redis.keyPrefix, maxSessions: config.routing.maxSessions, ttlMs: config.routing.sessionTtlMs, metrics, log })
    : createMemorySessionStore({ maxSessions: config.routing.maxSessions, ttlMs: config.routing.sessionTtlMs }));
  // The local store is always there; a shared one reports its own connection.
  if (!config.redis.url) metrics.storeUp.set(1);
  const router = createRouter(config.routing.strategy, { store, options: config.routing.options });
  const agent = createUpstreamAgent({ connectTimeoutMs: config.timeouts.connectMs, tlsByOrigin: tlsByOrigin(config.upstreams) });
  const fleet = createFleet({ config, registry, router, store, agent, metrics, log, resolver: deps.resolver });
  const { health } = fleet;
  const admission = createAdmission(config.limits.maxInflightPerReplica, config.timeouts.queueMs, metrics);

  let draining = false;
  const isDraining = () => draining;
  const open = new Set<Promise<unknown>>();

  // Read per request: a reload replaces `config` and `identity` here.
  const pipeline = {
    agent, admission, health, metrics, config, registry, router, log,
    byName: registry.byName,
    recorder: createRecorder({ metrics, log, router }),
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
  const beforeScrape = () => {
    const pins = router.pinsByReplica();
    const t = Date.now();
    for (const r of registry.replicas) {
      metrics.sessionsPinned.set({ replica: r.name }, pins.get(r.name) ?? 0);
      metrics.inflight.set({ replica: r.name }, r.inflight);
      metrics.scrapeAge.set({ replica: r.name }, r.lastScrapeAt === null ? -1 : (t - r.lastScrapeAt) / 1000);
    }
    metrics.prefixEntries.set(router.stats().prefixEntries);
  };
  const admin = buildAdmin({ registry, router, metrics, draining: isDraining, beforeScrape, drains: fleet.drains });

  for (const w of performanceWarnings(config)) log.warn({ setting: true }, w);

  const urlOf = (a: AddressInfo) => {
    const host = a.family === 'IPv6' ? `[${a.address}]` : a.address;
    return `http://${host === '0.0.0.0' || host === '[::]' ? '127.0.0.1' : host}:${a.port}`;
  };

  return {
    server, admin, registry, router, metrics, health, fleet, store, agent, log,
    draining: isDraining,
    reconfigure(next) {
      const fixed = FIXED_NAMES.filter((_, i) => JSON.stringify(FIXED_AT_START[i](next)) !== JSON.stringify(FIXED_AT_START[i](pipeline.config)));
      if (fixed.length) log.warn({ keys: fixed }, 'config reload: these settings apply only at start; the running values stay');
      router.setOptions({ ...next.routing.options, prefixMaxEntries: pipeline.config.routing.options.prefixMaxEntries, prefixTtlMs: pipeline.config.routing.options.prefixTtlMs, prior: pipeline.config.routing.options.prior });
      admission.setLimits(next.limits.maxInflightPerReplica, next.timeouts.queueMs);
      fleet.reconfigure(next);
      pipeline.config = next;
      pipeline.identity = identityOptionsOf(next);
      log.level = next.logging.level;
      metrics.configReloads.inc({ result: 'applied' });
      log.warn({ replicas: next.upstreams.map((u) => u.name) }, 'config reloaded');
    },
    async listen() {
      if (store.ready) await waitReady(store.ready(), log);
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
      fleet.stop();
      log.info({ open: open.size, drainMs: config.timeouts.drainMs }, 'draining: no new requests, waiting for open streams');
      const closed = new Promise<void>((r) => server.close(() => r()));
      server.closeIdleConnections();
      const drained = Promise.allSettled([...open]);
      let timer: NodeJS.Timeout | undefined;
      const timedOut = await Promise.race([
        drained.then(() => false),
        new Promise<boolean>((r) => { timer = setTimeout(() => r(true), config.timeouts.drainMs); }),
      ]);
      clearTimeout(timer);
      if (timedOut) log.warn({ open: open.size }, 'drain timeout: closing the remaining streams');
      // Every exchange is over (or out of time): what is left are keep-alive connections that
      // went idle after close() began; they would otherwise hold the process for keepAliveTimeout.
      server.closeAllConnections();
      await closed;
      await admin.close();
      await agent.close().catch(() => agent.destroy());
      await store.close();
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
