import type { Dispatcher } from 'undici';
import type { Logger } from 'pino';
import type { ResolvedConfig, UpstreamConfig } from '../config/schema.js';
import type { RequestIdentity } from '../identify/identity.js';
import type { Router } from '../routing/types.js';
import type { SessionStore } from '../store/types.js';
import type { Metrics } from '../telemetry/metrics.js';
import { createDiscovery, type AddressResolver, type Discovery } from './discovery.js';
import { createDrains, type Drains } from './drain.js';
import { createHealth, type Health, type HealthOptions } from './health.js';
import { createTokenRatioProbe } from './token-ratio.js';
import { createHotPrefixes, type HotPrefixes } from './hot-prefixes.js';
import { createKvStreams, type KvStreams } from './kv-events/streams.js';
import { createLastPrompts, type LastPrompts } from './last-prompts.js';
import { createMembership, type Membership } from './membership.js';
import type { Registry } from './registry.js';
import { createWarmup, type Warmup } from './warmup.js';

/** The end of one exchange, as fleet/ needs it. */
export interface ServedExchange {
  readonly ending: string;
  readonly status: number;
  readonly replica: string | null;
}

/** Everything that keeps the fleet right while it changes under the gateway. */
export interface Fleet {
  readonly health: Health;
  readonly drains: Drains;
  readonly membership: Membership;
  readonly discovery: Discovery;
  readonly warmup: Warmup;
  readonly lastPrompts: LastPrompts;
  readonly hot: HotPrefixes;
  /** vLLM KV event subscribers, one per replica that publishes. */
  readonly kvStreams: KvStreams;
  /** Per exchange, after it ended: keeps the keyed session's last prompt, counts its shared prefix. */
  served(identity: RequestIdentity, target: string, body: Buffer | null, ended: ServedExchange): void;
  /** Resolves dns:// upstreams and checks the fleet once (before listening). */
  init(): Promise<void>;
  start(): void;
  stop(): void;
  /** A reloaded configuration: replicas added or removed, and every fleet setting. */
  reconfigure(next: ResolvedConfig): void;
}

export function healthOptionsOf(c: ResolvedConfig): HealthOptions {
  return { ...c.health, prefixTtlMs: c.routing.options.prefixTtlMs, outlier: c.outlier };
}

const sameUpstream = (a: UpstreamConfig, b: UpstreamConfig) => a.url === b.url && a.apiKey === b.apiKey && JSON.stringify(a.tls) === JSON.stringify(b.tls);

export function createFleet(deps: {
  config: ResolvedConfig;
  registry: Registry;
  router: Router;
  store: SessionStore;
  agent: Dispatcher;
  metrics: Metrics;
  log: Logger;
  resolver?: AddressResolver;
  /** Told when a replica has left, so its admission queue goes too. */
  forgetAdmission: (name: string) => void;
}): Fleet {
  const { registry, router, store, agent, metrics, log } = deps;
  let config = deps.config;
  for (const reason of ['join', 'restart', 'long_outage']) for (const outcome of ['done', 'incomplete']) metrics.warmups.inc({ reason, outcome }, 0);
  for (const change of ['joined', 'left', 'drain', 'name_conflict']) metrics.fleetChanges.inc({ change }, 0);

  const lastPrompts = createLastPrompts(config.handoff);
  const hot = createHotPrefixes(config.warmup);
  // eslint-disable-next-line prefer-const -- health and warmup refer to each other
  let health: Health;
  // Warmup and handoff replays in flight end with the gateway: shutdown is bounded by drainMs.
  const stopping = new AbortController();
  const warmup = createWarmup({
    agent, stopping: stopping.signal, hot, health: () => health, metrics, log, options: config.warmup,
    homeSet: (name) => router.homeSet(name), capacityFill: () => config.routing.options.capacityFill,
  });
  const probeTokenRatio = createTokenRatioProbe({
    agent, metrics, log,
    timeoutMs: () => config.health.probeTimeoutMs,
    bytesPerToken: () => config.routing.identity.bytesPerToken,
    observe: (estimated, reported) => router.tokenRatio(estimated, reported),
  });
  health = createHealth({
    registry, agent, metrics, log,
    options: healthOptionsOf(config),
    forget: (name, cause, newProcessSince) => (cause === 'restart' && newProcessSince !== null ? router.replicaRestarted(name, newProcessSince) : router.forgetReplica(name)),
    warm: (r, reason) => void warmup.warm(r, reason),
    modelsKnown: (r) => void probeTokenRatio(r),
  });
  const drains = createDrains({ registry, router, store, lastPrompts, agent, stopping: stopping.signal, metrics, log, options: config.handoff });
  const membership = createMembership({ registry, health, drains, router, metrics, log, drainMs: () => config.timeouts.drainMs, forgetAdmission: deps.forgetAdmission });
  const discovery = createDiscovery({ membership, log, metrics, upstreams: config.upstreams, options: config.discovery, resolver: deps.resolver });
  const kvStreams = createKvStreams({ config, replicas: () => registry.replicas, router, metrics, log });

  return {
    health, drains, membership, discovery, warmup, lastPrompts, hot, kvStreams,
    served(identity, target, body, ended) {
      if (body === null || ended.ending !== 'complete' || ended.status >= 400 || identity.kind === 'other') return;
      if (identity.sessionKey !== null && config.handoff.enabled) {
        lastPrompts.keep(identity.sessionKey, { target, body, identity });
        if (ended.replica !== null && registry.byName(ended.replica)?.draining) drains.servedWhileDraining(ended.replica, identity.sessionKey);
      }
      if (config.warmup.enabled) hot.seen(identity, target, body);
    },
    async init() {
      await discovery.refresh();
      await health.probeAll();
      await health.scrapeAll();
    },
    start() {
      health.start();
      discovery.start();
      kvStreams.start();
    },
    stop() {
      health.stop();
      discovery.stop();
      kvStreams.stop();
      stopping.abort();
    },
    reconfigure(next) {
      const before = new Map(config.upstreams.filter((u) => !u.url.startsWith('dns:')).map((u) => [u.name, u]));
      const after = new Map(next.upstreams.filter((u) => !u.url.startsWith('dns:')).map((u) => [u.name, u]));
      for (const [name, u] of after) {
        const had = before.get(name);
        if (had === undefined) membership.join(u, { upstream: name, kind: 'static' });
        else if (!sameUpstream(had, u)) log.warn({ replica: name }, 'config reload: a replica\'s url, apiKey or tls changed under the same name; give it a new name to replace it (kept as it was)');
        const r = registry.byName(name);
        if (r && r.source.kind === 'static') r.weight = u.weight;
      }
      for (const name of before.keys()) if (!after.has(name)) membership.leave(name, 'config');
      config = next;
      health.setOptions(healthOptionsOf(next));
      drains.setOptions(next.handoff);
      warmup.setOptions(next.warmup);
      discovery.setUpstreams(next.upstreams, next.discovery);
      kvStreams.setConfig(next);
    },
  };
}
