import { Type, type Static } from '@sinclair/typebox';

// The one place every default lives. config/warmroute.example.yaml shows these values and a test
// fails when the two disagree.

const Port = (def: number) => Type.Integer({ minimum: 0, maximum: 65535, default: def });
const Ms = (def: number, min = 1) => Type.Integer({ minimum: min, default: def });
const NonNegative = (def: number) => Type.Number({ minimum: 0, default: def });
const Section = <T extends Parameters<typeof Type.Object>[0]>(props: T) => Type.Object(props, { default: {}, additionalProperties: false });

export const UpstreamSchema = Type.Object({
  /** Name shown in headers, metrics and logs; defaults to host:port of the url. */
  name: Type.Optional(Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_.:-]+$' })),
  /**
   * One replica (`http(s)://host:port`), or every address of a DNS name (`dns://name:port`, a
   * Kubernetes headless Service): its A/AAAA records are re-resolved every discovery.intervalMs,
   * each address a replica named `ip:port`.
   */
  url: Type.String({ pattern: '^(https?|dns)://[^/]+/?$' }),
  /**
   * Replaces the client's Authorization header towards this replica; never logged or returned.
   * Visible ASCII only: a CR or LF here would end up in the request head.
   */
  apiKey: Type.Optional(Type.String({ minLength: 1, maxLength: 4096, pattern: '^[\\x21-\\x7e]+$' })),
  weight: Type.Number({ exclusiveMinimum: 0, default: 1 }),
  /**
   * vLLM's KV cache events (its --kv-events-config publisher): the ZMQ PUB endpoint, the ROUTER one
   * for replays (optional: a gap then loses exactness until the stream is back in sequence) and
   * the topic. For dns:// upstreams use the top-level kvEvents.port convention instead.
   */
  kvEvents: Type.Optional(Type.Object({
    endpoint: Type.String({ pattern: '^tcp://[^/]+:[0-9]+$' }),
    replayEndpoint: Type.Optional(Type.String({ pattern: '^tcp://[^/]+:[0-9]+$' })),
    topic: Type.Optional(Type.String()),
    /** Data-parallel ranks (vLLM's --data-parallel-size): rank r publishes at the endpoints' ports + r. Default: kvEvents.dataParallelSize. */
    dataParallelSize: Type.Optional(Type.Integer({ minimum: 1, maximum: 256 })),
  }, { additionalProperties: false })),
  /** https replicas: a private CA (PEM file) and the name to verify, when it is not the url's host. */
  tls: Type.Optional(Type.Object({
    caFile: Type.Optional(Type.String({ minLength: 1 })),
    servername: Type.Optional(Type.String({ minLength: 1 })),
  }, { additionalProperties: false })),
}, { additionalProperties: false });

export const ApiKeySchema = Type.Object({
  sha256: Type.String({ pattern: '^[0-9a-fA-F]{64}$' }),
  /** Shown in logs and in the `key` label of metrics, never the key itself. */
  name: Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_.:-]+$', default: 'unnamed' }),
  /** Requests open at once with this key; past it, 429 with Retry-After. 0: no limit. */
  maxConcurrent: Type.Integer({ minimum: 0, default: 0 }),
  /** The priority class of every request with this key (before any header or body field). */
  priority: Type.Optional(Type.Union([Type.Literal('interactive'), Type.Literal('batch')])),
}, { additionalProperties: false });

export const SessionKeySourceSchema = Type.Union([
  Type.String({ pattern: '^(header|body):.+$' }),
  Type.Object({
    from: Type.Union([Type.Literal('header'), Type.Literal('body')]),
    name: Type.String({ minLength: 1 }),
    enabled: Type.Boolean({ default: true }),
  }, { additionalProperties: false }),
]);

/** How prompts are cut into prefix-chain links and sized in tokens (src/identify/). */
export const IdentitySchema = Section({
  /** Token estimate: UTF-8 bytes per token (4 for English prose, where bytes = chars). */
  bytesPerToken: Type.Number({ exclusiveMinimum: 0, default: 4 }),
  /** /v1/completions string prompts: bytes per link (64 ≈ 16 tokens ≈ one vLLM block). */
  blockBytes: Type.Integer({ minimum: 4, default: 64 }),
  /** /v1/completions token-id prompts: ids per link (vLLM's block size). */
  blockTokens: Type.Integer({ minimum: 1, default: 16 }),
  /** /v1/completions: the placement key is the link ending this many blocks in (≈ 256 tokens). */
  placementBlocks: Type.Integer({ minimum: 1, default: 16 }),
});

/** Tuning of the routing strategies (src/routing/). */
export const RoutingOptionsSchema = Section({
  /**
   * c of consistent hashing with bounded loads (Mirrokni–Thorup–Zadimoghaddam): a new placement
   * (or a spill target) may not take a replica past c × the average in-flight load, weighted.
   */
  loadFactor: Type.Number({ exclusiveMinimum: 1, default: 1.25 }),
  /**
   * A pinned session (or a keyless one following its prefix) stays on its replica until that
   * replica's load passes max(hardCapFactor × average, hardCapMin); then it spills and re-pins.
   * Must be ≥ loadFactor.
   */
  hardCapFactor: Type.Number({ exclusiveMinimum: 1, default: 2 }),
  /**
   * Floor of the hard cap, in requests in flight per unit of weight: at low traffic balance never
   * beats a warm cache (one vLLM replica decodes dozens of voice sessions at once without queueing).
   */
  hardCapMin: NonNegative(16),
  /**
   * Half-life of each replica's recent request count, the load that new placements and spill
   * targets are also bounded on (c × average): sessions in think time have nothing in flight.
   */
  trafficHalfLifeMs: NonNegative(30_000),
  /** A session that moved less than this long ago only moves again for the hard cap or a failure (anti-flap). */
  spillCooldownMs: NonNegative(10_000),
  /** Worth of one unit of weighted score, in ms of estimated TTFT (score bonuses are subtracted from it). */
  scoreMs: NonNegative(100),
  /** Estimated costs within this many ms are a tie, broken at random. */
  tieMs: NonNegative(1),
  weights: Section({
    /** Session pin scorer: 1 for the replica a keyed session is pinned to. */
    sessionPin: NonNegative(1),
    /** Prefix match scorer: matched prefix tokens / prompt tokens, per replica. */
    prefixMatch: NonNegative(1),
    /** Load scorer: 1 for an idle replica with an empty KV cache, towards 0 as either fills. */
    load: NonNegative(0.2),
    /**
     * Adapter slot scorer: 1 where a request for a LoRA adapter meets no slot wait (its adapter runs
     * there, or a slot is free), 0 where every slot holds other adapters with work in flight. At
     * the default scoreMs, 10 makes a slot wait cost 1 s of estimated TTFT: a pinned session moves
     * off such a replica when that is more than its warm prefix saves there.
     */
    adapterSlot: NonNegative(10),
  }),
  /**
   * An adapter this gateway sent to a replica counts as holding one of its LoRA slots, beside those
   * the replica's last scrape showed running, until a scrape taken at least this long after it was
   * sent: a request needs a moment to reach vLLM's engine, where the scrape would see it.
   */
  adapterBusyMs: NonNegative(500),
  /** The cost model's starting point for a replica it has not observed yet (and the pull-back target). */
  prior: Section({
    /** TTFT of a fully cached prompt on an idle replica (seed figure: 28 ms warm floor). */
    fixedMs: NonNegative(30),
    /** Prefill per uncached token (seed figures: 130 ms fresh 1K, 864 ms cold 5.5K → ~0.13). */
    prefillMsPerToken: Type.Number({ exclusiveMinimum: 0, default: 0.13 }),
    /** Added TTFT per request waiting in the replica's queue (vllm:num_requests_waiting). */
    queueMsPerWaiting: NonNegative(50),
    /** Added TTFT per request already running (decode batches slow each step a little). */
    msPerRunning: NonNegative(1),
  }),
  /** RLS forgetting factor per observation: 0.98 ≈ the last 50 requests to each replica weigh most. */
  costForgetting: Type.Number({ exclusiveMinimum: 0, maximum: 1, default: 0.98 }),
  /**
   * Prefix index bound in (chain link × replica) entries; 0 disables prefix matching. 10,000
   * sessions × 30 turns × ~2 new links per turn, rounded up: < 100 MB (see prefix-index.ts).
   */
  prefixMaxEntries: Type.Integer({ minimum: 0, default: 640_000 }),
  /** A link not served again for this long is assumed evicted (≈ vLLM's prefix lifetime under steady load). */
  prefixTtlMs: NonNegative(600_000),
  /**
   * A session counts in its replica's estimated working set (its agent's prompt once, plus its own
   * tokens) until it has been idle this long: capacity-aware placement (src/routing/placement.ts).
   */
  workingSetWindowMs: NonNegative(60_000),
  /**
   * Share of a replica's KV capacity (vllm:cache_config_info) the working sets may plan to fill;
   * the rest is decode room and the estimate's slack. Past it on the smallest replica (every
   * active agent's prompt plus a replica's share of the sessions), new sessions are placed by
   * capacity: with their agent, where it fits.
   */
  capacityFill: Type.Number({ exclusiveMinimum: 0, maximum: 1, default: 0.9 }),
  /** session-hash strategy: ring points per unit of replica weight. */
  ringVnodes: Type.Integer({ minimum: 1, default: 160 }),
  /** session-hash strategy, requests without a key: rotate (`round-robin`) or hash the first user turn (`first-turn`). */
  sessionHashKeyless: Type.Union([Type.Literal('round-robin'), Type.Literal('first-turn')], { default: 'round-robin' }),
});

/** vLLM's operator routes: never forwarded for a client, whatever routes.extraPaths says. */
export const VLLM_OPERATOR_PATHS: readonly string[] = ['/v1/load_lora_adapter', '/v1/unload_lora_adapter'];

export const LOST_STATE_ACTIONS = ['error', 'forward'] as const;

/** The Responses API's stored responses (src/routing/stored-responses.ts). */
export const ResponsesSchema = Section({
  /**
   * A request that continues a stored response (`previous_response_id`, or /v1/responses/{id})
   * whose replica is gone — down, draining, removed — cannot succeed elsewhere: vLLM keeps stored
   * responses in the memory of the replica that produced them. `error` answers 409
   * `response_state_lost` naming the cause; `forward` sends it to the next choice anyway (where
   * vLLM will answer 404 unless the state was shared some other way). Counted either way.
   */
  onLostState: Type.Union(LOST_STATE_ACTIONS.map((a) => Type.Literal(a)), { default: 'error' }),
  /** Response id → replica records kept (least recently stored dropped beyond; ~200 bytes each). */
  maxRecords: Type.Integer({ minimum: 1, default: 200_000 }),
  /**
   * How long a record lives after its response was served. vLLM never evicts its store, and an
   * agent may come back to a conversation long after a voice session would: longer than pins.
   */
  recordTtlMs: Ms(3_600_000),
  /**
   * With Redis: a follow-up whose record this gateway lacks (restarted, scaled up, past its local
   * bound) waits at most this long for the shared store before routing; only a record that is in
   * neither is `unknown`. The local case does not wait at all.
   */
  fetchMs: Ms(250),
});

/** An adapter's name as the adapters section accepts it (and as adapters.directory's subdirectories must be named). */
export const ADAPTER_NAME_PATTERN = '^[A-Za-z0-9_.:/-]{1,128}$';

/** LoRA adapters the gateway manages (docs/adapters.md): loaded on demand, versions rolled out per session. */
export const AdaptersSchema = Section({
  /**
   * Adapters the gateway may load on a replica when a request names one that no healthy replica
   * has loaded: name → its path as the replicas see it (vLLM's `lora_path`). The replicas need
   * VLLM_ALLOW_RUNTIME_LORA_UPDATING=1. Empty: the gateway never loads or unloads an adapter.
   */
  sources: Type.Record(Type.String({ pattern: ADAPTER_NAME_PATTERN }), Type.String({ minLength: 1 }), { default: {} }),
  /**
   * The base model each adapter the gateway may load applies to, as the replicas serve it (its id
   * in their /v1/models): it is loaded only on replicas that serve that model. Needed where the
   * replicas serve more than one base model; an adapter without one may be loaded on any replica
   * with LoRA slots (a warning when they serve several). Without an entry, the base a replica
   * lists it under (its `parent`) is used once some replica has it loaded.
   */
  bases: Type.Record(Type.String({ pattern: ADAPTER_NAME_PATTERN }), Type.String({ minLength: 1 }), { default: {} }),
  /**
   * A directory of adapters the gateway may load, besides `sources`: each subdirectory holding an
   * adapter_config.json is one, named after the subdirectory (a name also in `sources` is the
   * source's). Read at start, at every reload and every `rescanMs`.
   */
  directory: Section({
    /** The directory as the replicas see it: adapter `name` is loaded from `<path>/name`. Empty: no directory. */
    path: Type.String({ default: '' }),
    /**
     * Where the gateway lists it: the same volume mounted on the gateway's host (read-only is
     * enough). Empty: `path`, for a gateway that sees it where the replicas do.
     */
    listPath: Type.String({ default: '' }),
    /** How often it is listed again besides start and reloads; 0: only then. */
    rescanMs: Ms(60_000, 0),
    /** The base model of every adapter in it, as `bases` gives one (a name in `bases` is that entry's). Empty: unknown. */
    base: Type.String({ default: '' }),
  }),
  /**
   * Most adapters a replica holds (its /v1/models adapters); before a load past it, the least
   * recently used one of `sources` with nothing in flight is unloaded. 0: no bound.
   */
  maxLoadedPerReplica: Type.Integer({ minimum: 0, default: 0 }),
  /** Longest wait for a replica to load (or unload) an adapter; past it the waiting requests get a 502. */
  loadTimeoutMs: Ms(30_000),
  /**
   * Client model name → adapter versions and their weights, e.g. `support-agent: {support-agent-v3: 90,
   * support-agent-v4: 10}`. A session (its key) is given one version at its first request and keeps it
   * for every turn; a request without a session key is split by weight. A reload changes the
   * weights for new sessions only.
   */
  versions: Type.Record(Type.String({ pattern: ADAPTER_NAME_PATTERN }), Type.Record(Type.String({ pattern: ADAPTER_NAME_PATTERN }), Type.Number({ minimum: 0 })), { default: {} }),
  /**
   * Adapters with a label of their own in the per-adapter metrics: the busiest this many by recent
   * traffic; the rest are counted as `other`. Bounds the series whatever the fleet serves.
   */
  metricsTopN: Type.Integer({ minimum: 0, maximum: 100, default: 10 }),
});

export const TRACE_PROTOCOLS = ['http/protobuf', 'http/json'] as const;
export const TRACE_SAMPLERS = ['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio'] as const;
export const LOG_FORMATS = ['json', 'pretty'] as const;

export const STRATEGY_NAMES = ['affinity', 'round-robin', 'least-loaded', 'session-hash'] as const;

export const ConfigSchema = Type.Object({
  listen: Section({
    host: Type.String({ default: '0.0.0.0' }),
    port: Port(8080),
  }),
  admin: Section({
    host: Type.String({ default: '0.0.0.0' }),
    port: Port(9090),
    /**
     * When set, every /admin/* request needs `Authorization: Bearer <token>`; /metrics, /healthz
     * and /readyz stay open for probes and scrapers. Also WARMROUTE_ADMIN_TOKEN.
     */
    token: Type.Union([Type.String({ minLength: 16, pattern: '^[\\x21-\\x7e]+$' }), Type.Null()], { default: null }),
  }),
  /** Client API keys on the data plane. With none configured, the data plane is open. */
  auth: Section({
    /** Keys as SHA-256 hashes (hex), each with an optional name (logs, metrics) and concurrency limit. */
    apiKeys: Type.Array(ApiKeySchema, { default: [] }),
    /**
     * A YAML or JSON file holding a list of the same entries; read at start and whenever it
     * changes, once settled (edge/api-keys.ts). A read listing no key while the file held some
     * keeps the keys in force.
     */
    apiKeysFile: Type.Union([Type.String({ minLength: 1 }), Type.Null()], { default: null }),
  }),
  upstreams: Type.Array(UpstreamSchema, { minItems: 1 }),
  /** The data plane's route table (edge/routes.ts). */
  routes: Section({
    /**
     * More /v1/* paths forwarded as they are, besides the chat, completions, responses, Anthropic
     * messages and models routes and the built-in list (embeddings, audio transcriptions/translations,
     * score, rerank): exact paths, or prefixes ending in `/*`. Any other path is a 404. vLLM's
     * operator routes (/v1/load_lora_adapter, /v1/unload_lora_adapter) are never forwarded: the
     * gateway loads adapters itself (adapters.sources).
     */
    extraPaths: Type.Array(Type.String({ pattern: '^/v1/[A-Za-z0-9._~/-]*\\*?$' }), { default: [] }),
  }),
  routing: Section({
    strategy: Type.Union(STRATEGY_NAMES.map((s) => Type.Literal(s)), { default: 'affinity' }),
    /**
     * Ordered sources of the session key; the first present wins. Each is `header:<name>` /
     * `body:<field>` (`body:<field>.<field>` for one nested in an object), or `{ from, name,
     * enabled }` to list a source but keep it off (body:user and Anthropic's body:metadata.user_id
     * are: one user often holds several concurrent sessions).
     */
    sessionKeySources: Type.Array(SessionKeySourceSchema, {
      default: [
        'header:x-session-id', 'header:x-session-affinity', 'body:prompt_cache_key', 'body:session_id',
        { from: 'body', name: 'user', enabled: false },
        { from: 'body', name: 'metadata.user_id', enabled: false },
      ],
    }),
    maxSessionKeyBytes: Type.Integer({ minimum: 1, maximum: 4096, default: 256 }),
    identity: IdentitySchema,
    /** Pins kept in memory (LRU beyond), and how long an idle pin lives. */
    maxSessions: Type.Integer({ minimum: 1, default: 100_000 }),
    sessionTtlMs: Ms(600_000),
    options: RoutingOptionsSchema,
  }),
  responses: ResponsesSchema,
  timeouts: Section({
    /** TCP connect (and TLS handshake) to a replica; past it the next replica is tried. */
    connectMs: Ms(2_000),
    /** Request written → response headers of a streamed request (`stream: true`, or no generation); past it the client gets a 504. */
    headersMs: Ms(30_000),
    /**
     * The same for a non-streamed generation, whose headers come only once it is complete: past it
     * a 504, which (unlike headersMs) never counts toward the replica's ejection.
     */
    unstreamedHeadersMs: Ms(600_000),
    /** Longest silence between two response chunks before the stream is ended with an error. */
    idleMs: Ms(60_000),
    /**
     * A client that reads nothing of its response for this long is disconnected and its upstream
     * request aborted. Well under queueMs: a request queued behind a client that stopped reading
     * gets its slot when the stall is detected, before its own wait runs out (a voice client that
     * reads nothing for seconds is gone).
     */
    clientStallMs: Ms(5_000),
    /** Longest wait in a queue (limits.maxConcurrent, limits.maxInflightPerReplica); then 503. */
    queueMs: Ms(10_000),
    /** SIGTERM: how long in-flight streams may take to finish. */
    drainMs: Ms(30_000, 0),
  }),
  limits: Section({
    bodyBytes: Type.Integer({ minimum: 1024, default: 16 * 1024 * 1024 }),
    /** Nesting of arrays and objects in a JSON body; deeper is a 400. */
    jsonDepth: Type.Integer({ minimum: 8, maximum: 1024, default: 128 }),
    /** Messages in one chat request (or input items in one Responses request); more is a 400. */
    maxMessages: Type.Integer({ minimum: 1, default: 8192 }),
    /** Extra replicas tried when one fails before any response byte. */
    maxRetries: Type.Integer({ minimum: 0, maximum: 10, default: 2 }),
    /** Requests forwarded at once through this gateway; 0 = no limit. */
    maxConcurrent: Type.Integer({ minimum: 0, default: 0 }),
    /** Requests waiting for the global limit; beyond it, 503 with Retry-After. */
    maxQueued: Type.Integer({ minimum: 0, default: 256 }),
    /** Requests open on one replica through this gateway; 0 = no limit (vLLM queues itself). */
    maxInflightPerReplica: Type.Integer({ minimum: 0, default: 0 }),
    /** Requests waiting for one replica's limit; beyond it, the next replica, else 503. */
    maxQueuedPerReplica: Type.Integer({ minimum: 0, default: 64 }),
    /**
     * Share of each limit's slots (maxConcurrent, maxInflightPerReplica) only interactive requests
     * may take, so a batch burst never holds the last slot a caller needs (rounded, at most all but one).
     */
    reservedInteractiveShare: Type.Number({ minimum: 0, maximum: 1, default: 0.25 }),
    /**
     * Streamed batch requests awaiting their first token on one replica at once; none is let in
     * while an interactive request there awaits its own. A batch prefill shares the replica's engine
     * steps with a caller's turn, whatever vLLM's queue order. 0 = no such bound. Only batch-class
     * requests are held; 1 was the best voice TTFT for the least batch lost (docs/priority.md).
     */
    batchPrefillPerReplica: Type.Integer({ minimum: 0, default: 1 }),
  }),
  health: Section({
    /** Active checks: GET /health of every replica (and a /v1/models refresh) on this interval. */
    probeIntervalMs: Ms(2_000),
    /** A check that has not answered in this long failed. */
    probeTimeoutMs: Ms(1_000),
    /** Consecutive failed checks before a replica is marked down (one timeout is not an outage). */
    unhealthyThreshold: Type.Integer({ minimum: 1, default: 3 }),
    /** Consecutive passed checks before a down replica takes traffic again (one success is not a recovery). */
    healthyThreshold: Type.Integer({ minimum: 1, default: 2 }),
    /** Scrape of each replica's /metrics (queue depth, KV usage, restarts); 0 turns it off. */
    statsIntervalMs: Ms(1_000, 0),
  }),
  /**
   * Passive outlier detection from real traffic, as Envoy does it: a replica that fails this many
   * requests in a row is ejected for baseEjectionMs × the number of times it was ejected (up to
   * maxEjectionMs); the count is forgotten after a quiet period.
   */
  outlier: Section({
    /** Consecutive 5xx answers or response-header timeouts that eject a replica; 0 = never. */
    consecutiveErrors: Type.Integer({ minimum: 0, default: 5 }),
    /** Consecutive refused or timed-out connections that eject a replica (nothing listens: no need to wait); 0 = never. */
    consecutiveConnectFailures: Type.Integer({ minimum: 0, default: 1 }),
    /** First ejection time; the n-th ejection lasts n × this. */
    baseEjectionMs: Ms(5_000),
    maxEjectionMs: Ms(300_000),
    /** A replica not ejected for this long starts again from its first ejection time. */
    forgetAfterMs: Ms(600_000),
    /** Never eject more than this share of the fleet (Envoy's max_ejection_percent; one replica always may be, as in Envoy). */
    maxEjectionPercent: Type.Number({ minimum: 0, maximum: 100, default: 50 }),
  }),
  /** Reading vLLM's KV cache events (exact residency); per upstream `kvEvents` says where. */
  kvEvents: Section({
    /**
     * dns:// upstreams: every address's publisher is tcp://<address>:port (vLLM's default 5557);
     * null = no KV events for them. replayPort likewise (vLLM's replay socket, e.g. 5558).
     */
    port: Type.Union([Type.Integer({ minimum: 1, maximum: 65535 }), Type.Null()], { default: null }),
    replayPort: Type.Union([Type.Integer({ minimum: 1, maximum: 65535 }), Type.Null()], { default: null }),
    /** Topic for dns:// upstreams (and static ones that name none); '' = every topic. */
    topic: Type.String({ default: '' }),
    /** Data-parallel ranks per replica (vLLM's --data-parallel-size): rank r publishes at port + r, replays at replayPort + r. */
    dataParallelSize: Type.Integer({ minimum: 1, maximum: 256, default: 1 }),
    /** The tier routing counts: GPU (what a prefill reads first); CPU is vLLM's offload tier. */
    medium: Type.String({ minLength: 1, default: 'GPU' }),
    /**
     * Engine blocks remembered over the whole fleet, least recently used (stored, or ending a
     * served prompt's link) forgotten first whichever replica holds it: ≈ 60 B each (2,097,152 ≈
     * 126 MB at most, whatever the fleet's size).
     */
    maxBlocks: Type.Integer({ minimum: 1, default: 2_097_152 }),
    /** A replay that has not ended by then counts as failed: the replica loses exactness until its stream is back in order. */
    replayTimeoutMs: Ms(2_000),
    /** Live batches held while a replay runs; past it the replay is abandoned. */
    maxPendingBatches: Type.Integer({ minimum: 1, default: 10_000 }),
  }),
  /** dns:// upstreams. */
  discovery: Section({
    /** How often A/AAAA records are re-resolved. */
    intervalMs: Ms(5_000),
    /** DNS servers as `ip` or `ip:port`; empty = the system's resolver configuration. */
    servers: Type.Array(Type.String({ minLength: 1 }), { default: [] }),
  }),
  /**
   * Drain with warm handoff: before a pinned session leaves a draining replica, its last prompt is
   * replayed to its next choice with max_tokens 1, so its next turn starts warm there.
   */
  handoff: Section({
    enabled: Type.Boolean({ default: true }),
    /** Last prompt kept per keyed session (bytes); a larger one is not kept, and its session moves cold. */
    maxPromptBytes: Type.Integer({ minimum: 0, default: 262_144 }),
    /** Total bytes of last prompts kept (least recently used first out). */
    maxTotalBytes: Type.Integer({ minimum: 0, default: 67_108_864 }),
    /** Replays in flight at once, per drain. */
    concurrency: Type.Integer({ minimum: 1, default: 4 }),
    /** One replay's limit. */
    timeoutMs: Ms(30_000),
  }),
  /**
   * Deploy warmup: a replica that joins, or comes back with a cold cache, first gets the hottest
   * shared prefixes (system prompt + tools, top K by traffic) with max_tokens 1.
   */
  warmup: Section({
    enabled: Type.Boolean({ default: true }),
    /** Prefixes sent to a cold replica, the most used first; 0 = warmup off. */
    topK: Type.Integer({ minimum: 0, default: 8 }),
    /** Memory for the prefixes tracked (their request bodies), bytes. */
    maxBytes: Type.Integer({ minimum: 0, default: 8_388_608 }),
    /** Warmup requests in flight at once per replica. */
    concurrency: Type.Integer({ minimum: 1, default: 2 }),
    /** Longest warmup; past it the replica takes sessions anyway (logged). */
    timeoutMs: Ms(60_000),
  }),
  /**
   * Caller turns (record/turns.ts): every call of a session ending in the same last user message is
   * one turn; its calls, the caller's wait and the LLM time in it are measured and exported.
   */
  turns: Section({
    enabled: Type.Boolean({ default: true }),
    /** A turn with nothing in flight and no new call for this long is closed (a caller that went away). */
    idleMs: Ms(30_000),
    /** The caller's wait per turn past this counts in warmroute_turns_over_budget_total. */
    budgetMs: Ms(250),
    /** Sessions whose turns are followed (least recently active first out). */
    maxSessions: Type.Integer({ minimum: 1, default: 100_000 }),
    /** Closed turns kept per session for GET /admin/sessions/{key}. */
    keep: Type.Integer({ minimum: 0, maximum: 1000, default: 8 }),
  }),
  /** Priority classes (queue/priority.ts): interactive before batch in the gateway's queues. */
  priority: Section({
    /** Class of a request with a session key that names none (API key, x-priority, body priority). */
    sessionDefault: Type.Union([Type.Literal('interactive'), Type.Literal('batch')], { default: 'interactive' }),
    /** Class of a request without a session key that names none. */
    keylessDefault: Type.Union([Type.Literal('interactive'), Type.Literal('batch')], { default: 'interactive' }),
    /** TTFT deadline of an interactive request that names none (x-slo-ttft-ms), its order within the class; 0: none. */
    interactiveSloMs: Type.Integer({ minimum: 0, default: 0 }),
    batchSloMs: Type.Integer({ minimum: 0, default: 0 }),
    /** false: an interactive request whose deadline passes while it queues is answered then (503 deadline_exceeded), not served late. */
    answerLate: Type.Boolean({ default: false }),
    /**
     * The replicas run vLLM's --scheduling-policy priority: a request whose body has no `priority`
     * gets its class's (lower runs first). Off by default: vLLM refuses a priority under fcfs.
     */
    vllm: Section({
      enabled: Type.Boolean({ default: false }),
      interactive: Type.Integer({ default: 0 }),
      batch: Type.Integer({ default: 10 }),
    }),
  }),
  /** Requests that offer tools (the tool-call guard, edge/tool-guard.ts). */
  tools: Section({
    /**
     * A request that offers `tools` and asks for fewer tokens than this (max_tokens or
     * max_completion_tokens) is raised to it: fewer cut parallel tool calls mid-JSON. 0 = off.
     */
    minMaxTokens: Type.Integer({ minimum: 0, default: 256 }),
  }),
  headers: Section({
    /** x-warmroute-replica and x-warmroute-route on responses. */
    route: Type.Boolean({ default: true }),
    serverTiming: Type.Boolean({ default: true }),
  }),
  logging: Section({
    level: Type.Union(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l)), { default: 'info' }),
    /** `json`: one JSON object a line, for machines (the default); `pretty`: coloured lines for a terminal. */
    format: Type.Union(LOG_FORMATS.map((f) => Type.Literal(f)), { default: 'json' }),
    /** Debug only: include prompt text in debug logs. Never on in production. */
    logPrompts: Type.Boolean({ default: false }),
    /**
     * Key of the session tags in logs (HMAC of the session key): give every gateway of a deployment
     * the same one so their tags correlate. null: drawn at start (tags correlate within one
     * process only). Also WARMROUTE_SESSION_TAG_SECRET.
     */
    sessionTagSecret: Type.Union([Type.String({ minLength: 16 }), Type.Null()], { default: null }),
  }),
  /**
   * Mid-stream resume (off by default): when a replica dies after streaming part of a plain-text
   * chat answer, the request is sent to the next replica with the partial answer as an assistant
   * message to continue (vLLM's continue_final_message), and the continuation is spliced into the
   * same stream. Sampling goes on elsewhere: the answer is not byte-identical to an uninterrupted one.
   */
  resume: Section({
    enabled: Type.Boolean({ default: false }),
    /** Most bytes of the partial answer's stream kept to resume it; a longer one is not resumed. */
    maxBytes: Type.Integer({ minimum: 1024, default: 256 * 1024 }),
  }),
  adapters: AdaptersSchema,
  /**
   * Realtime transcription (`/v1/realtime`, a WebSocket): each connection is relayed to one replica
   * for its life (edge/realtime.ts). Connections are counted apart from requests (limits.*).
   */
  realtime: Section({
    enabled: Type.Boolean({ default: true }),
    /** Realtime connections open at once through this gateway; past it an upgrade is a 503. 0 = no limit. */
    maxConnections: Type.Integer({ minimum: 0, default: 1024 }),
    /** Realtime connections open at once on one replica through this gateway; a full replica takes no more. 0 = no limit. */
    maxConnectionsPerReplica: Type.Integer({ minimum: 0, default: 0 }),
    /** Largest message either way; a bigger one closes the connection with 1009. */
    maxFrameBytes: Type.Integer({ minimum: 1024, default: 4 * 1024 * 1024 }),
    /** A connection with no frame either way (pings included) for this long is closed with 1001. */
    idleMs: Ms(60_000),
    /** Connect to a replica and read its session.created within this; past it the next replica is tried. */
    openMs: Ms(10_000),
  }),
  redis: Section({
    /**
     * Session pins, and stored-response records under `<keyPrefix>resp:`.
     * `redis://` / `rediss://` (one server), `redis-sentinel://host:port,host:port/<master>`
     * (Sentinel), `redis-cluster://host:port,host:port` (Cluster: session keys are hash-tagged).
     */
    url: Type.Union([Type.String({ pattern: '^(rediss?|redis-sentinel|redis-cluster)://' }), Type.Null()], { default: null }),
    keyPrefix: Type.String({ default: 'warmroute:' }),
  }),
  /**
   * OpenTelemetry traces (OTLP/HTTP): on when a traces endpoint is set here or in the standard
   * environment (OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT), which wins over this section like every
   * other OTEL_* variable; OTEL_SDK_DISABLED=true or `disabled` turns it off. Read at start.
   */
  tracing: Section({
    /** Base URL: /v1/traces is appended (OTEL_EXPORTER_OTLP_ENDPOINT). */
    endpoint: Type.Union([Type.String({ pattern: '^https?://[^/]' }), Type.Null()], { default: null }),
    /** The traces URL as is (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT). */
    tracesEndpoint: Type.Union([Type.String({ pattern: '^https?://[^/]' }), Type.Null()], { default: null }),
    protocol: Type.Union(TRACE_PROTOCOLS.map((p) => Type.Literal(p)), { default: 'http/protobuf' }),
    /** Sent with every export, e.g. a vendor's API key (OTEL_EXPORTER_OTLP_HEADERS). */
    headers: Type.Record(Type.String(), Type.String(), { default: {} }),
    /** One export's bound, its retries included (OTEL_EXPORTER_OTLP_TIMEOUT): a collector that is down costs a batch this long. */
    timeoutMs: Ms(10000),
    serviceName: Type.String({ minLength: 1, default: 'warmroute' }),
    resourceAttributes: Type.Record(Type.String(), Type.String(), { default: {} }),
    sampler: Type.Union(TRACE_SAMPLERS.map((p) => Type.Literal(p)), { default: 'parentbased_always_on' }),
    /** The ratio of the *traceidratio samplers. */
    samplerArg: Type.Number({ minimum: 0, maximum: 1, default: 1 }),
    /** The batch span processor (OTEL_BSP_*): at most maxQueueSize spans wait; past it they are dropped and counted. */
    batch: Section({
      maxQueueSize: Type.Integer({ minimum: 1, default: 2048 }),
      maxExportBatchSize: Type.Integer({ minimum: 1, default: 512 }),
      scheduledDelayMs: Ms(5000, 0),
      exportTimeoutMs: Ms(30000),
    }),
    disabled: Type.Boolean({ default: false }),
  }),
}, { additionalProperties: false });

export type Config = Static<typeof ConfigSchema>;
export type UpstreamConfig = Static<typeof UpstreamSchema> & { name: string };
export type ResolvedConfig = Omit<Config, 'upstreams'> & { upstreams: UpstreamConfig[] };
export type RoutingOptions = Static<typeof RoutingOptionsSchema>;
export type ResponsesConfig = Static<typeof ResponsesSchema>;
export type AdaptersConfig = Static<typeof AdaptersSchema>;
export type LostStateAction = (typeof LOST_STATE_ACTIONS)[number];
export type IdentityConfig = Static<typeof IdentitySchema>;
export type SessionKeySourceConfig = Static<typeof SessionKeySourceSchema>;
export type StrategyName = (typeof STRATEGY_NAMES)[number];
export type TracingConfig = Config['tracing'];
export type LogFormat = (typeof LOG_FORMATS)[number];
