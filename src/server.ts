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
import { createHealth, type Health, type HealthOptions } from './fleet/health.js';
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
}

export interface Gateway {
  readonly server: Server;
  readonly admin: FastifyInstance;
  readonly registry: Registry;
  readonly router: Router;
  readonly metrics: Metrics;
  readonly health: Health;
  readonly store: SessionStore;
  readonly agent: Agent;
  readonly log: Logger;
  /** Probes the fleet once, then listens on both ports; returns the bound addresses. */
  listen(): Promise<{ url: string; adminUrl: string }>;
  /** Stops taking requests, lets open exchanges finish (up to drainMs), then closes everything. */
  close(): Promise<void>;
  readonly draining: () => boolean;
}

/** The composition root: every part of the gateway built once, from the configuration. */
export function buildGateway(config: ResolvedConfig, deps: GatewayDeps = {}): Gateway {
  const log = deps.log ?? createLogger(config.logging.level);
  const metrics = createMetrics({ defaultMetrics: deps.defaultMetrics });
  for (const reason of ROUTE_REASONS) metrics.decisions.inc({ reason }, 0);
  const registry = createRegistry(config.upstreams);
  const store = deps.store ?? (config.redis.url
    ? createRedisSessionStore({ url: config.redis.url, keyPrefix: config.redis.keyPrefix, maxSessions: config.routing.maxSessions, ttlMs: config.routing.sessionTtlMs, metrics, log })
    : createMemorySessionStore({ maxSessions: config.routing.maxSessions, ttlMs: config.routing.sessionTtlMs }));
  const router = createRouter(config.routing.strategy, { store, options: config.routing.options });
  const agent = createUpstreamAgent({ connectTimeoutMs: config.timeouts.connectMs, tlsByOrigin: tlsByOrigin(config.upstreams) });
  const health = createHealth({
    registry, agent, metrics, log,
    options: healthOptionsOf(config),
    forget: (name) => router.forgetReplica(name),
  });
  const admission = createAdmission(config.limits.maxInflightPerReplica, config.timeouts.queueMs, metrics);

  let draining = false;
  const isDraining = () => draining;
  const open = new Set<Promise<unknown>>();

  const handle = createPipeline({
    agent, admission, health, metrics, config, registry, router, log,
    byName: registry.byName,
    recorder: createRecorder({ metrics, log, router }),
    identity: identityOptionsOf(config),
    draining: isDraining,
    track(p) {
      open.add(p);
      void p.finally(() => open.delete(p));
    },
  });
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
  const admin = buildAdmin({ registry, router, metrics, draining: isDraining, beforeScrape });

  for (const w of performanceWarnings(config)) log.warn({ setting: true }, w);

  const urlOf = (a: AddressInfo) => {
    const host = a.family === 'IPv6' ? `[${a.address}]` : a.address;
    return `http://${host === '0.0.0.0' || host === '[::]' ? '127.0.0.1' : host}:${a.port}`;
  };

  return {
    server, admin, registry, router, metrics, health, store, agent, log,
    draining: isDraining,
    async listen() {
      if (store.ready) await waitReady(store.ready(), log);
      await health.probeAll();
      await health.scrapeAll();
      health.start();
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
      health.stop();
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

/** The fleet's health settings in a configuration. */
export function healthOptionsOf(c: ResolvedConfig): HealthOptions {
  return { ...c.health, prefixTtlMs: c.routing.options.prefixTtlMs, outlier: c.outlier };
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
