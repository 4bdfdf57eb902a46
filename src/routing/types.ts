/**
 * The routing contract: filters → scorers → picker → a ranked list of replicas and a reason.
 * Routing is synchronous: everything it reads is already in memory when a request arrives.
 */

/** Why a request went where it went. Bounded: used as a metric label. */
export const ROUTE_REASONS = ['pinned', 'prefix', 'placed', 'spill', 'failover', 'random', 'least-loaded', 'hash'] as const;
export type RouteReason = (typeof ROUTE_REASONS)[number];

/** What routing may read of one replica at decision time (owned by fleet/registry). */
export interface ReplicaView {
  readonly name: string;
  readonly weight: number;
  readonly up: boolean;
  readonly draining: boolean;
  /** Requests this gateway has open on the replica. */
  readonly inflight: number;
  /** Models the replica serves, from its /v1/models; null until learned (then it is not filtered). */
  readonly models: ReadonlySet<string> | null;
  /** From the replica's /metrics (vllm:num_requests_waiting / _running / kv_cache_usage_perc); 0 when unknown. */
  readonly waiting: number;
  readonly running: number;
  readonly kvUsage: number;
  /** KV cache capacity in tokens (num_gpu_blocks × block_size), null when unknown. */
  readonly kvCapacityTokens: number | null;
}

/** What the gateway knows of a request, computed once from the parsed body and headers. */
export interface RequestIdentity {
  readonly kind: 'chat' | 'completion' | 'other';
  readonly model: string | null;
  /** Explicit affinity key (x-session-id, prompt_cache_key, ...), already length-checked. */
  readonly sessionKey: string | null;
  /** Where the key came from, e.g. `header:x-session-id`; bounded, safe as a log field. */
  readonly sessionKeySource: string | null;
  /** Cumulative prefix hashes: chain[i] covers links 0..i, so turn n's chain extends turn n−1's. */
  readonly chain: readonly string[];
  /** Estimated prompt tokens covered by chain[0..i]. */
  readonly chainTokens: readonly number[];
  /** Estimated prompt tokens of the whole request. */
  readonly promptTokens: number;
  /** Stable key for a fresh placement when there is no session key (e.g. hash of the first user turn). */
  readonly placementKey: string | null;
  /**
   * Estimated tokens before the first user message (seed + system/developer messages): a prefix
   * match no longer than this is the shared system prompt, not this conversation. 0 when unknown.
   */
  readonly sharedTokens?: number;
}

export interface RouteRequest {
  readonly identity: RequestIdentity;
  readonly replicas: readonly ReplicaView[];
}

export interface Decision {
  /** Best first; the forwarder fails over down this list. Never empty (empty → an error is thrown). */
  readonly ranked: readonly ReplicaView[];
  readonly reason: RouteReason;
  /** Tokens of the prompt the chosen replica is believed to hold warm (0 when unknown). */
  readonly matchedTokens: number;
  /** The cost model's TTFT estimate for the first ranked replica, ms (affinity strategy only). */
  readonly estimatedTtftMs?: number;
}

/** Filters narrow the candidate set; they never reorder. */
export interface Filter {
  readonly name: string;
  apply(req: RouteRequest, candidates: readonly ReplicaView[]): readonly ReplicaView[];
}

/** A scorer gives each candidate a score in [0, 1]; the pipeline weights and sums them. */
export interface Scorer {
  readonly name: string;
  score(req: RouteRequest, candidates: readonly ReplicaView[]): ReadonlyMap<string, number>;
}

export interface ScoredReplica {
  readonly replica: ReplicaView;
  readonly score: number;
}

export interface Picker {
  readonly name: string;
  pick(req: RouteRequest, scored: readonly ScoredReplica[]): { ranked: readonly ReplicaView[]; reason: RouteReason; matchedTokens: number };
}

/** What the gateway tells the router once a replica has answered (or failed). */
export interface ServedOutcome {
  readonly replica: string;
  readonly ok: boolean;
  /** Replica's own time to first token (request written → first token bytes), ms. */
  readonly upstreamTtftMs: number | null;
  readonly promptTokens: number | null;
  readonly cachedTokens: number | null;
}

export interface SessionInfo {
  readonly key: string;
  readonly replica: string;
  readonly since: number;
  readonly lastSeen: number;
  readonly warmTokens: number;
}

export interface Router {
  readonly strategy: string;
  /** Synchronous on purpose: no await on the hot path. Throws a WarmrouteError when nothing fits. */
  route(req: RouteRequest): Decision;
  /** Called when a replica produced its first response byte (ok) or failed before it. */
  served(identity: RequestIdentity, outcome: ServedOutcome): void;
  /** Admin: the pin of a session key, if any. */
  session(key: string): SessionInfo | null;
  /** Admin: remove a session's pin; true if there was one. */
  unpin(key: string): boolean;
  /** Number of live pins per replica (for /admin/replicas). */
  pinsByReplica(): ReadonlyMap<string, number>;
  /** A replica left the fleet or restarted: its cache is gone, forget what routing believed it held. */
  forgetReplica?(replica: string): void;
  /** Routing state for /admin and gauges; cheap enough to call once per scrape, not per request. */
  stats?(): RouterStats;
}

/** What the cost model has learned about one replica. */
export interface ReplicaCost {
  readonly fixedMs: number;
  readonly prefillMsPerToken: number;
  readonly queueMsPerWaiting: number;
  readonly msPerRunning: number;
  /** Observations behind the estimate (0: still the prior). */
  readonly samples: number;
}

export interface RouterStats {
  /** Entries (chain link × replica) in the prefix index. */
  readonly prefixEntries: number;
  /** Estimated prompt tokens the index believes each replica holds. */
  readonly prefixTokensByReplica: ReadonlyMap<string, number>;
  readonly costByReplica: ReadonlyMap<string, ReplicaCost>;
  /** Learned ratio of reported prompt tokens to the gateway's estimate (1 until usage is seen). */
  readonly tokenScale: number;
}
