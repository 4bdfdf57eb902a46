import type { AddressInfo } from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { Agent } from 'undici';
import { createUpstreamClient } from './proxy/upstream/client.js';
import { buildAdmin } from './admin.js';
import type { ResolvedConfig } from './config/schema.js';
import { performanceWarnings } from './config/load.js';
import { createHealth, type Health } from './fleet/health.js';
import { createRegistry, type Registry } from './fleet/registry.js';
import { createAdmission } from './proxy/admission.js';
import { createServer } from 'node:http';
import { createProxy, type ProxyDeps } from './proxy/exchange.js';
import { createFastPath } from './proxy/fast-path.js';
import { registerClientRoutes } from './proxy/routes.js';
import { createRouter, type Strategy } from './routing/router.js';
import type { Router } from './routing/types.js';
import type { RoutingOptionsInput } from './routing/options.js';
import { createMemorySessionStore } from './store/memory.js';
import { createRedisSessionStore } from './store/redis.js';
import type { SessionStore } from './store/types.js';
import { createLogger } from './telemetry/logger.js';
import { createMetrics, type Metrics } from './telemetry/metrics.js';

export interface GatewayDeps {
  log?: Logger;
  store?: SessionStore;
  /** Default-process metrics (GC, event loop); off in tests that run many gateways. */
  defaultMetrics?: boolean;
}

export interface Gateway {
  readonly app: FastifyInstance;
  readonly admin: FastifyInstance;
  readonly registry: Registry;
  readonly router: Router;
  readonly metrics: Metrics;
  readonly health: Health;
  readonly store: SessionStore;
  readonly log: Logger;
  /** Probes the fleet once, then listens on both ports; returns the bound addresses. */
  listen(): Promise<{ url: string; adminUrl: string }>;
  /** Stops taking requests, lets open exchanges finish (up to drainMs), then closes everything. */
  close(): Promise<void>;
  readonly draining: () => boolean;
}

export function buildGateway(config: ResolvedConfig, deps: GatewayDeps = {}): Gateway {
  const log = deps.log ?? createLogger(config.logging.level);
  const metrics = createMetrics({ defaultMetrics: deps.defaultMetrics });
  const registry = createRegistry(config.upstreams);
  const store = deps.store ?? (config.redis.url
    ? createRedisSessionStore({ url: config.redis.url, keyPrefix: config.redis.keyPrefix, maxSessions: config.routing.maxSessions, ttlMs: config.routing.sessionTtlMs, metrics, log })
    : createMemorySessionStore({ maxSessions: config.routing.maxSessions, ttlMs: config.routing.sessionTtlMs }));
  const router = createRouter(config.routing.strategy as Strategy, { store, options: config.routing.options as RoutingOptionsInput });
  // Forwarded requests go over the upstream client's keep-alive sockets; undici's agent serves the
  // gateway's own calls to the replicas (health, models, metrics).
  const upstream = createUpstreamClient({
    connectTimeoutMs: config.timeouts.connectMs,
    onStaleRetry: (origin) => {
      metrics.staleRetries.inc();
      log.debug({ origin }, 'replica closed an idle connection as a request was written: sent again on a new one');
    },
  });
  const agent = new Agent({
    connect: { timeout: config.timeouts.connectMs },
    keepAliveTimeout: 30_000,
    keepAliveMaxTimeout: 600_000,
    connections: null,
    pipelining: 1,
  });
  const health = createHealth({
    registry, agent, metrics, log,
    onRecovered: (name) => router.forgetReplica?.(name),
    options: {
      downBackoffMs: config.health.downBackoffMs,
      probeIntervalMs: config.health.probeIntervalMs,
      statsIntervalMs: config.health.statsIntervalMs,
      probeTimeoutMs: Math.min(config.timeouts.connectMs, 2_000),
    },
  });
  const admission = createAdmission(config.limits.maxInflightPerReplica, config.timeouts.queueMs, metrics);

  let draining = false;
  const isDraining = () => draining;
  const open = new Set<Promise<unknown>>();

  const proxyDeps: ProxyDeps = {
    upstream, admission, health, router, metrics, config, registry, log,
    byName: registry.byName,
    identityOptions: { sessionKeySources: config.routing.sessionKeySources, maxSessionKeyBytes: config.routing.maxSessionKeyBytes, ...config.routing.identity },
    draining: isDraining,
    track(p) {
      open.add(p);
      void p.finally(() => open.delete(p));
    },
  };
  const proxy = createProxy(proxyDeps);
  const fastPath = createFastPath(proxy, { bodyLimit: config.limits.bodyBytes, log });
  const app = Fastify({
    logger: false, bodyLimit: config.limits.bodyBytes, forceCloseConnections: 'idle', return503OnClosing: false,
    serverFactory: (handler) => {
      const server = createServer((req, res) => { if (!fastPath(req, res)) handler(req, res); });
      server.keepAliveTimeout = 65_000;
      return server;
    },
  });
  registerClientRoutes(app, proxyDeps, proxy);
  // Routing state as gauges, computed when Prometheus scrapes rather than per request.
  const beforeScrape = () => {
    const pins = router.pinsByReplica();
    for (const r of registry.replicas) {
      metrics.sessionsPinned.set({ replica: r.name }, pins.get(r.name) ?? 0);
      // In flight is read here rather than set per request: a labelled gauge set hashes its labels.
      metrics.inflight.set({ replica: r.name }, r.inflight);
    }
    const st = router.stats?.();
    if (st) metrics.prefixEntries.set(st.prefixEntries);
  };
  const admin = buildAdmin({ registry, router, metrics, draining: isDraining, beforeScrape });

  for (const w of performanceWarnings(config)) log.warn({ setting: true }, w);

  const addr = (f: FastifyInstance) => {
    const a = f.server.address() as AddressInfo;
    const host = a.family === 'IPv6' ? `[${a.address}]` : a.address;
    return `http://${host === '0.0.0.0' || host === '[::]' ? '127.0.0.1' : host}:${a.port}`;
  };

  return {
    app, admin, registry, router, metrics, health, store, log,
    draining: isDraining,
    async listen() {
      if (store.ready) await waitReady(store.ready(), log);
      await health.probeAll();
      await health.scrapeAll();
      health.start();
      await app.listen({ host: config.listen.host, port: config.listen.port });
      await admin.listen({ host: config.admin.host, port: config.admin.port });
      const urls = { url: addr(app), adminUrl: addr(admin) };
      log.info({ ...urls, strategy: router.strategy, replicas: registry.replicas.map((r) => ({ name: r.name, up: r.up })) }, 'warmroute listening');
      return urls;
    },
    async close() {
      if (draining) return;
      draining = true;
      metrics.draining.set(1);
      health.stop();
      log.info({ open: open.size, drainMs: config.timeouts.drainMs }, 'draining: no new requests, waiting for open streams');
      const closed = app.close();
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
      app.server.closeAllConnections();
      await closed;
      await admin.close();
      await upstream.close();
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
