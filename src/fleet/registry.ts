import type { UpstreamConfig } from '../config/schema.js';
import type { ReplicaView } from '../routing/types.js';

/** A replica's live state. Routing reads it as a ReplicaView; fleet/ and proxy/ update it in place. */
export interface ReplicaState extends ReplicaView {
  readonly url: string;
  readonly origin: string;
  readonly apiKey: string | undefined;
  up: boolean;
  draining: boolean;
  inflight: number;
  models: Set<string> | null;
  /** The replica's /v1/models entries, served (merged) on the gateway's /v1/models. */
  modelEntries: unknown[];
  waiting: number;
  running: number;
  kvUsage: number;
  kvCapacityTokens: number | null;
  /** Monotonic ms before which a down replica is not probed back. */
  downUntil: number;
  lastError: string | null;
  lastErrorAt: number | null;
}

export interface Registry {
  readonly replicas: readonly ReplicaState[];
  /** The same array, typed for routing: no copy per request. */
  readonly views: readonly ReplicaView[];
  byName(name: string): ReplicaState | undefined;
}

export function createRegistry(upstreams: readonly UpstreamConfig[]): Registry {
  const replicas: ReplicaState[] = upstreams.map((u) => ({
    name: u.name,
    weight: u.weight,
    url: u.url,
    origin: new URL(u.url).origin,
    apiKey: u.apiKey,
    up: true,
    draining: false,
    inflight: 0,
    models: null,
    modelEntries: [],
    waiting: 0,
    running: 0,
    kvUsage: 0,
    kvCapacityTokens: null,
    downUntil: 0,
    lastError: null,
    lastErrorAt: null,
  }));
  const index = new Map(replicas.map((r) => [r.name, r]));
  return {
    replicas,
    views: replicas,
    byName: (name) => index.get(name),
  };
}
