import type { UpstreamConfig } from '../config/schema.js';
import type { LoraSlots, ReplicaView } from '../routing/types.js';
import type { Mismatch } from './config-audit.js';
import type { ReplicaConfig } from './replica-config.js';

/** How an upstream entry became a replica: listed in config, or one address of a dns:// name. */
export interface ReplicaSource {
  /** The config entry's name (for a dns:// upstream, the name every one of its addresses shares). */
  readonly upstream: string;
  readonly kind: 'static' | 'dns';
}

/** A drain in progress (or finished): what GET /admin/replicas shows of it. */
export interface DrainProgress {
  readonly startedAt: number;
  readonly cause: string;
  readonly handoff: boolean;
  /** Pinned sessions found on the replica when the drain began. */
  sessions: number;
  /**
   * Handed off warm, moved cold (nothing to replay, or handoff off), failed (the replay failed:
   * moved cold), no target (routing found no other replica: the pin stays), still waiting.
   */
  warmed: number;
  movedCold: number;
  failed: number;
  noTarget: number;
  pending: number;
  finishedAt: number | null;
  /** The first reason a session could not be handed off, for the drain's summary line. */
  firstError: string | null;
}

/** A replica's live state. Routing reads it as a ReplicaView; fleet/ updates it in place. */
export interface ReplicaState extends ReplicaView {
  readonly url: string;
  readonly origin: string;
  readonly apiKey: string | undefined;
  weight: number;
  readonly source: ReplicaSource;
  /** What routing reads: healthy by the active checks, not ejected, not warming up. Owned by fleet/health.ts. */
  up: boolean;
  draining: boolean;
  inflight: number;
  peerInflight: number;
  models: Set<string> | null;
  /** The replica's /v1/models entries, served (merged) on the gateway's /v1/models. */
  modelEntries: unknown[];
  adapters: ReadonlyMap<string, string>;
  lora: LoraSlots | null;
  waiting: number;
  running: number;
  kvUsage: number;
  kvCapacityTokens: number | null;
  /** What it reports of its configuration (fleet/replica-config.ts); null before the first read. */
  config: ReplicaConfig | null;
  /** Settings on which it is configured unlike the fleet (fleet/config-audit.ts); empty when none. */
  configMismatch: readonly Mismatch[];
  lastError: string | null;
  lastErrorAt: number | null;
  /** Active checks: the verdict, and the run of equal results behind the next one. */
  healthy: boolean;
  checkFailures: number;
  checkSuccesses: number;
  /** Passive outlier detection: failures in a row from real traffic, and the current ejection. */
  consecutiveErrors: number;
  consecutiveConnectFailures: number;
  /** Wall ms until which the replica is ejected (0: not ejected). */
  ejectedUntil: number;
  ejections: number;
  lastEjectedAt: number;
  /** Sent the hottest prefixes before it takes sessions (fleet/warmup.ts). */
  warming: boolean;
  /** Wall ms when it stopped taking traffic (down or ejected), null while it is up. */
  downSince: number | null;
  /** Wall ms of the last /metrics scrape that succeeded; null before the first. */
  lastScrapeAt: number | null;
  /** From /metrics, to notice a restart: process start (s) and the prefix-cache counters. */
  startTimeSeconds: number | null;
  prefixQueries: number | null;
  drain: DrainProgress | null;
}

export interface Registry {
  /** Every replica: one array, updated in place (routing reads it per request, no copy). */
  readonly replicas: readonly ReplicaState[];
  /** The same array, typed for routing. */
  readonly views: readonly ReplicaView[];
  byName(name: string): ReplicaState | undefined;
  /** A replica joins: it takes traffic once fleet/ marks it up. Returns the existing one if the name is taken. */
  add(u: UpstreamConfig, source?: ReplicaSource): ReplicaState;
  /** The replica leaves the fleet (after its drain); true if it was there. */
  remove(name: string): boolean;
}

export function newReplica(u: UpstreamConfig, source: ReplicaSource): ReplicaState {
  return {
    name: u.name,
    weight: u.weight,
    url: u.url,
    origin: new URL(u.url).origin,
    apiKey: u.apiKey,
    source,
    up: true,
    draining: false,
    inflight: 0,
    peerInflight: 0,
    models: null,
    modelEntries: [],
    adapters: new Map(),
    lora: null,
    waiting: 0,
    running: 0,
    kvUsage: 0,
    kvCapacityTokens: null,
    config: null,
    configMismatch: [],
    lastError: null,
    lastErrorAt: null,
    healthy: true,
    checkFailures: 0,
    checkSuccesses: 0,
    consecutiveErrors: 0,
    consecutiveConnectFailures: 0,
    ejectedUntil: 0,
    ejections: 0,
    lastEjectedAt: 0,
    warming: false,
    downSince: null,
    lastScrapeAt: null,
    startTimeSeconds: null,
    prefixQueries: null,
    drain: null,
  };
}

/** The static upstreams of a configuration; dns:// ones join as fleet/discovery.ts resolves them. */
export function createRegistry(upstreams: readonly UpstreamConfig[]): Registry {
  const replicas: ReplicaState[] = [];
  const index = new Map<string, ReplicaState>();
  const registry: Registry = {
    replicas,
    views: replicas,
    byName: (name) => index.get(name),
    add(u, source = { upstream: u.name, kind: 'static' }) {
      const had = index.get(u.name);
      if (had) return had;
      const r = newReplica(u, source);
      replicas.push(r);
      index.set(r.name, r);
      return r;
    },
    remove(name) {
      const r = index.get(name);
      if (!r) return false;
      index.delete(name);
      replicas.splice(replicas.indexOf(r), 1);
      return true;
    },
  };
  for (const u of upstreams) if (!u.url.startsWith('dns:')) registry.add(u);
  return registry;
}
