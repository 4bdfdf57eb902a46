/**
 * The routing contract: filters → scorers → picker → a ranked list of replicas and a reason.
 * Routing is synchronous: everything it reads is already in memory when a request arrives.
 */
import type { RequestIdentity } from '../identify/identity.js';
import type { SessionInfo } from '../store/types.js';
import type { Drift } from './drift.js';
import type { KvEvent } from './kv-residency.js';
import type { RoutingOptionsInput } from './options.js';

/** Why a request went where it went. Bounded: used as a metric label. */
/**
 * `capacity`: a new session placed away from its agent's replicas because their KV caches are full
 * (or, when no cache has room, where it evicts least); `spill`: moved or placed away for load.
 */
/**
 * `adapter`: a request for a LoRA adapter placed where its adapter runs or a slot is free for it
 * (other replicas would have made it wait for a slot), or moved off its replica for that reason.
 */
export const ROUTE_REASONS = ['pinned', 'prefix', 'placed', 'spill', 'capacity', 'adapter', 'failover', 'round-robin', 'least-loaded', 'hash'] as const;
export type RouteReason = (typeof ROUTE_REASONS)[number];

/**
 * Why a request that needs a stored response (Responses API) could not go to the replica holding
 * it: the replica is down, draining, no longer in the fleet, or restarted since it stored the
 * response (its process, and the store in it, are new); or the gateway never saw the id (another
 * gateway's before it was shared, a gateway restart, an expired record). Bounded: a metric label.
 */
/**
 * `unknown`: no record here nor in the shared store (routed as usual); `unconfirmed`: no record
 * here and the shared store did not answer in time (routed as usual too).
 */
export const STATE_LOST_REASONS = ['down', 'draining', 'removed', 'restarted', 'unknown', 'unconfirmed'] as const;
export type StateLostReason = (typeof STATE_LOST_REASONS)[number];

/** What routing may read of one replica at decision time (owned here; fleet/registry keeps it up to date). */
export interface ReplicaView {
  readonly name: string;
  readonly weight: number;
  readonly up: boolean;
  readonly draining: boolean;
  /** Requests this gateway has open on the replica. */
  readonly inflight: number;
  /**
   * Requests the other gateways sharing this one's store have open on it, as they last told
   * (fleet/peer-inflight.ts, every batch interval); absent or 0 without a shared store.
   */
  readonly peerInflight?: number;
  /** Models the replica serves, from its /v1/models; null until learned (then it is not filtered). */
  readonly models: ReadonlySet<string> | null;
  /** From the replica's /metrics (vllm:num_requests_waiting / _running / kv_cache_usage_perc); 0 when unknown. */
  readonly waiting: number;
  readonly running: number;
  readonly kvUsage: number;
  /** KV cache capacity in tokens (num_gpu_blocks × block_size), null when unknown. */
  readonly kvCapacityTokens: number | null;
  /** LoRA adapters it serves (its /v1/models entries with a `parent`): adapter → base model. Absent: none. */
  readonly adapters?: ReadonlyMap<string, string>;
  /** Its LoRA slots now (vllm:lora_requests_info); absent or null: LoRA off or not reported. */
  readonly lora?: LoraSlots | null;
  /** Wall ms of its last /metrics scrape that succeeded (what `lora` is as of); null before the first. */
  readonly lastScrapeAt?: number | null;
}

/**
 * A replica's LoRA slots: vLLM runs at most `maxLoras` distinct adapters in one batch (--max-loras);
 * a request for any other waits until one of them has nothing left running.
 */
export interface LoraSlots {
  readonly maxLoras: number;
  readonly running: ReadonlySet<string>;
  readonly waiting: ReadonlySet<string>;
}

export interface RouteRequest {
  readonly identity: RequestIdentity;
  readonly replicas: readonly ReplicaView[];
  /**
   * The model is a LoRA adapter the gateway loads on demand and no replica taking traffic lists
   * it: the replicas that could load it (the model filter keeps them). Absent otherwise.
   */
  readonly loadable?: (r: ReplicaView) => boolean;
}

/**
 * Everything a filter, scorer or picker may read about the request being routed, looked up once
 * per request and passed to each of them as an argument.
 */
export interface RouteContext extends RouteRequest {
  /** Wall-clock ms (pins carry wall times across gateways). */
  readonly now: number;
  /** The session's pin, for a request with a session key that has one. */
  readonly pin: SessionInfo | null;
  /** Prompt tokens each replica is believed to hold warm (prefix index, and the pin's own record). */
  readonly warm: ReadonlyMap<string, number>;
  /** The replica this session's last request failed on after its first byte: placed elsewhere now. */
  readonly avoid: string | null;
  /**
   * Keyless requests: where this conversation (by its placement key) was last served, as every
   * gateway sharing the store knows it. It stands in for the prefix index when this gateway has
   * not seen the conversation's earlier turns (they went through another gateway).
   */
  readonly conversation?: SessionInfo | null;
  /**
   * Whether the candidates' KV caches are under pressure (routing/pressure.ts): judged once per
   * decision by the router's pressure watch, for a fresh placement. Absent: never.
   */
  readonly pressured?: (candidates: readonly ReplicaView[]) => boolean;
  /**
   * Sums over every candidate past the filters, when the scorers and the picker see a shortlist
   * of them (routing/shortlist.ts): what the load bounds and scores compare against. Absent: the
   * candidates are every one of them.
   */
  readonly fleet?: FleetLoad;
  /** A request that names a LoRA adapter: the candidates' slots as it would meet them. Absent otherwise. */
  readonly adapters?: AdapterSlotsView;
}

/** Every filtered candidate and its sums, so that a shortlist is bounded and scored as the whole fleet would be. */
export interface FleetLoad {
  /** Every candidate past the filters (a fresh placement ranks them all). */
  readonly all: readonly ReplicaView[];
  /** Σ depthOf (load.ts). */
  readonly depth: number;
  /** Σ weightOf. */
  readonly weight: number;
  /** The largest depthOf / weightOf. */
  readonly deepest: number;
  /** Σ recent traffic (traffic.ts). */
  readonly traffic: number;
}

/** Narrows the candidate set; never reorders. */
export interface Filter {
  readonly name: string;
  apply(ctx: RouteContext, candidates: readonly ReplicaView[]): readonly ReplicaView[];
}

/** A score in [0, 1] per candidate, in candidate order. */
export interface Scorer {
  readonly name: string;
  score(ctx: RouteContext, candidates: readonly ReplicaView[]): readonly number[];
}

export interface WeightedScorer {
  readonly scorer: Scorer;
  readonly weight: number;
}

/** Orders the scored candidates (best first, the rest in failover order) and says why. */
export interface Picker {
  readonly name: string;
  pick(ctx: RouteContext, candidates: readonly ReplicaView[], scores: readonly number[]): Decision;
}

export interface Decision {
  /** Best first; the forwarder fails over down this list. Never empty (empty → an error is thrown). */
  readonly ranked: readonly ReplicaView[];
  readonly reason: RouteReason;
  /** Tokens of the prompt the chosen replica is believed to hold warm (0 when unknown). */
  readonly matchedTokens: number;
  /** The cost model's TTFT estimate for the first ranked replica, ms (affinity strategy only). */
  readonly estimatedTtftMs?: number;
  /** This turn's prompt no longer extends the session's previous one (routing/drift.ts). */
  readonly drift?: Drift | null;
  /** A LoRA adapter's request sent where it is expected to wait for a slot: no replica without that wait had room. */
  readonly slotWait?: boolean;
  /** A LoRA adapter's request: what it was believed to meet on the first ranked replica (adapter-slots.ts); null where slots are not reported. */
  readonly adapterSlot?: AdapterSlotBelief | null;
}

/** A strategy: filters, weighted scorers and a picker, and whether routing learns from what it served. */
export interface Composition {
  readonly filters: readonly Filter[];
  readonly scorers: readonly WeightedScorer[];
  readonly picker: Picker;
  /** Record prefixes, pins and costs of served requests (the baselines ignore them). */
  readonly learns: boolean;
  /**
   * A request that needs a stored response goes to the replica holding it, whatever its load
   * (stored-responses.ts); the ids of the responses served are recorded. The baselines do not.
   */
  readonly stateful: boolean;
  /** Narrows the filtered candidates to those worth scoring (routing/shortlist.ts); absent: all of them. */
  readonly shortlist?: (ctx: RouteContext, candidates: readonly ReplicaView[]) => { readonly candidates: readonly ReplicaView[]; readonly fleet: FleetLoad };
}

/**
 * What the gateway tells the router once an exchange is over: `ok` (the replica answered below
 * 400 and its response reached the client whole), `error` (it answered an error, or could not be
 * reached: nothing learned), `interrupted` (its response broke off after the first byte: the
 * session's next request goes elsewhere, as a failover).
 */
export interface ServedOutcome {
  readonly replica: string;
  readonly result: 'ok' | 'error' | 'interrupted';
  /** The replica's own time to first token (request written → first token bytes), ms. */
  readonly replicaTtftMs: number | null;
  readonly promptTokens: number | null;
  readonly cachedTokens: number | null;
  /** Responses API: the id of the response the replica produced (and stores). */
  readonly responseId?: string | null;
}

export interface Router {
  readonly strategy: string;
  /** Synchronous on purpose: no await on the hot path. Throws a WarmrouteError when nothing fits. */
  route(req: RouteRequest): Decision;
  /**
   * Before route(), for a request naming a stored response with no record in this gateway's view:
   * a bounded read of the shared store (responses.fetchMs), so a record another gateway wrote is
   * routed to its replica. null (the common case): nothing to wait for.
   */
  prefetch?(identity: RequestIdentity): Promise<void> | null;
  served(identity: RequestIdentity, outcome: ServedOutcome): void;
  /** Admin: the pin of a session key, if any. */
  session(key: string): SessionInfo | null;
  /** Admin: the last prompt drift seen for a session key, if any. */
  lastDrift(key: string): Drift | null;
  /** A config reload: new knobs for the next decisions (throws on nonsense, like at start). */
  setOptions(options: RoutingOptionsInput): void;
  /** Admin: remove a session's pin; true if there was one. */
  unpin(key: string): boolean;
  /** Admin: the replica recorded as holding a stored response, if any. */
  storedResponse(id: string): SessionInfo | null;
  /** Number of live pins per replica (for /admin/replicas). */
  pinsByReplica(): ReadonlyMap<string, number>;
  /**
   * When a request for `adapter` was last routed to `replica` (wall ms), by this gateway or by any
   * gateway sharing its store; null when none is remembered (adapter-slots.ts keeps them for the
   * working-set window).
   */
  adapterSentAt(replica: string, adapter: string): number | null;
  /** A replica left the fleet or restarted: its cache is gone, forget what routing believed it held (prefix index, pins). */
  forgetReplica(replica: string): void;
  /**
   * A replica's process restarted, at `since` (wall ms) or later: forgotten as above, and the
   * responses it stored before then are gone with the old process (vLLM's store is in memory).
   */
  replicaRestarted(replica: string, since: number): void;
  /** A replica left the fleet for good: forgotten as above, and its learned costs dropped too. */
  replicaLeft(replica: string): void;
  /** The replica's tokenizer made `reported` tokens of a text estimated at `estimated`: the token scale learns it. */
  tokenRatio(estimated: number, reported: number): void;
  /** The agents a replica will serve and whether the caches are under pressure (its warmup asks). */
  homeSet(replica: string): HomeSet;
  /** Routing state for /admin and gauges; cheap enough to call once per scrape, not per request. */
  stats(): RouterStats;
  /**
   * A replica's KV events (fleet/kv-events/) from one data-parallel rank (0 without), decoded and
   * of the tier routing counts. What they say is evicted is forgotten; links matched to their
   * blocks while the stream is live stop expiring by age.
   */
  kvEvents(replica: string, events: readonly KvEvent[], rank?: number): void;
  /**
   * A rank's event stream: `live` (in sequence, proved), `restarted` (it starts empty: nothing it
   * held before is believed), `lost` (a gap no replay filled, or no stream: the links matched
   * there are forgotten, and none is matched until it is live again).
   */
  kvStream(replica: string, state: 'live' | 'restarted' | 'lost', rank?: number): void;
}

/** What the router tells about its cache beliefs, for the metrics (server.ts wires them). */
export interface ResidencyObserver {
  /** A served request with usage: the cached tokens the index predicted there (replica tokens) and those served. */
  cachedTokens(replica: string, predicted: number, served: number): void;
  /** The replica served fewer cached tokens than predicted: it evicted (`source`: feedback) or its events said so (events). */
  evicted(replica: string, source: 'feedback' | 'events', links: number): void;
  /** Mapping a served request to the replica's engine blocks: learned, or why not. */
  learned(replica: string, outcome: string): void;
}

/**
 * What a replica's warmup should send it. `agents`: the shared-prefix keys (the chain link ending
 * an agent's system prompt and tools) of the agents it will serve. `pressured`: the fleet's KV
 * caches cannot hold every active agent on every replica, so it gets those agents only.
 */
export interface HomeSet {
  readonly pressured: boolean;
  readonly agents: readonly string[];
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
  /** Stored-response records (response id → replica) this gateway holds. */
  readonly responseRecords: number;
  /** Per replica: how long an unused prefix not matched to an engine block is believed kept (ms); matched ones go when its KV events say so. */
  readonly retentionByReplica: ReadonlyMap<string, number>;
  /** Per replica with KV events: engine blocks known resident, and chain links mapped to them. */
  readonly kvBlocksByReplica: ReadonlyMap<string, { blocks: number; links: number }>;
  /** Estimated working set per replica, in the replica's tokens (routing/working-set.ts), against its KV capacity. */
  readonly workingSetTokensByReplica: ReadonlyMap<string, number>;
}

/**
 * A request's view of the candidates' LoRA slots, built once per decision for a request that names
 * an adapter (absent otherwise).
 */
export interface AdapterSlotsView {
  readonly adapter: string;
  /**
   * 1 where the request would wait for a slot (every slot held by other adapters with work in
   * flight, or, where its adapter is not at home, every slot another adapter's home), else 0.
   */
  wait(r: ReplicaView): number;
  /**
   * What the request is believed to meet on `r`: its adapter `running` there (by the scrape, or
   * sent since), a `free` slot, or a `wait`; null where the replica reports no slots.
   */
  slot(r: ReplicaView): AdapterSlotBelief | null;
  /** For a new session: what its placement reads of `r` (AdapterPlaceView). */
  place(r: ReplicaView): AdapterPlaceView;
  /** Its adapter's requests routed lately, and every adapter's (AdapterRecency.demand). */
  demand(): { readonly mine: number; readonly all: number };
}

/** What a new session of an adapter reads of one replica's slots. */
export interface AdapterPlaceView {
  /**
   * 0 where its adapter is at home (running, waiting, or sent within the working-set window) and
   * not stuck waiting, 1 where a slot is free for it, 2 where every slot is homed by other
   * adapters. A replica that reports no slots is 1: nothing known either way.
   */
  readonly tier: number;
  /** Its LoRA slots (max_loras); 0 where it reports none. */
  readonly slots: number;
  /** The adapter requests routed there lately (AdapterRecency.routed). */
  readonly load: number;
}

export type AdapterSlotBelief = 'running' | 'free' | 'wait';
