import { Type, type Static } from '@sinclair/typebox';

const Port = (def: number) => Type.Integer({ minimum: 0, maximum: 65535, default: def });
const Ms = (def: number, min = 1) => Type.Integer({ minimum: min, default: def });

export const UpstreamSchema = Type.Object({
  /** Name shown in headers, metrics and logs; defaults to host:port of the url. */
  name: Type.Optional(Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_.:-]+$' })),
  url: Type.String({ pattern: '^https?://[^/]+/?$' }),
  /** Replaces the client's Authorization header towards this replica; never logged or returned. */
  apiKey: Type.Optional(Type.String({ minLength: 1 })),
  weight: Type.Number({ exclusiveMinimum: 0, default: 1 }),
}, { additionalProperties: false });

export const ConfigSchema = Type.Object({
  listen: Type.Object({
    host: Type.String({ default: '0.0.0.0' }),
    port: Port(8080),
  }, { default: {}, additionalProperties: false }),
  admin: Type.Object({
    host: Type.String({ default: '0.0.0.0' }),
    port: Port(9090),
  }, { default: {}, additionalProperties: false }),
  upstreams: Type.Array(UpstreamSchema, { minItems: 1 }),
  routing: Type.Object({
    strategy: Type.Union([Type.Literal('affinity'), Type.Literal('round-robin'), Type.Literal('least-loaded'), Type.Literal('session-hash')], { default: 'affinity' }),
    /**
     * Ordered sources of the session key; the first present wins. Each is `header:<name>` /
     * `body:<field>`, or `{ from, name, enabled }` to list a source but keep it off (body:user is).
     */
    sessionKeySources: Type.Array(Type.Union([
      Type.String({ pattern: '^(header|body):.+$' }),
      Type.Object({
        from: Type.Union([Type.Literal('header'), Type.Literal('body')]),
        name: Type.String({ minLength: 1 }),
        enabled: Type.Boolean({ default: true }),
      }, { additionalProperties: false }),
    ]), {
      default: [
        'header:x-session-id', 'header:x-session-affinity', 'body:prompt_cache_key', 'body:session_id',
        { from: 'body', name: 'user', enabled: false },
      ],
    }),
    maxSessionKeyBytes: Type.Integer({ minimum: 1, maximum: 4096, default: 256 }),
    /** How prompts are cut into prefix-chain links and sized in tokens (see src/routing/identity.ts). */
    identity: Type.Object({
      bytesPerToken: Type.Number({ exclusiveMinimum: 0, default: 4 }),
      blockBytes: Type.Integer({ minimum: 4, default: 64 }),
      blockTokens: Type.Integer({ minimum: 1, default: 16 }),
      placementBlocks: Type.Integer({ minimum: 1, default: 16 }),
    }, { default: {}, additionalProperties: false }),
    /** Pins kept in memory (LRU beyond), and how long an idle pin lives. */
    maxSessions: Type.Integer({ minimum: 1, default: 100_000 }),
    sessionTtlMs: Ms(600_000),
    /** Strategy-specific tuning passed to the router (see src/routing/options.ts). */
    options: Type.Record(Type.String(), Type.Unknown(), { default: {} }),
  }, { default: {}, additionalProperties: false }),
  timeouts: Type.Object({
    connectMs: Ms(2_000),
    /** Request written → response headers; past it the client gets a 504. */
    headersMs: Ms(30_000),
    /** Longest silence between two response chunks before the stream is ended with an error. */
    idleMs: Ms(60_000),
    /** Longest wait for a free slot when a replica is at maxInflightPerReplica. */
    queueMs: Ms(10_000),
    /** SIGTERM: how long in-flight streams may take to finish. */
    drainMs: Ms(30_000, 0),
  }, { default: {}, additionalProperties: false }),
  limits: Type.Object({
    bodyBytes: Type.Integer({ minimum: 1024, default: 16 * 1024 * 1024 }),
    /** Extra replicas tried when one fails before any response byte. */
    maxRetries: Type.Integer({ minimum: 0, maximum: 10, default: 2 }),
    /** Admission control per replica; 0 = no gateway-side queue. */
    maxInflightPerReplica: Type.Integer({ minimum: 0, default: 0 }),
  }, { default: {}, additionalProperties: false }),
  health: Type.Object({
    /** A replica that refused a connection is skipped this long before a probe may bring it back. */
    downBackoffMs: Ms(5_000),
    /** Active probes (GET /health) of every replica, and /v1/models refresh. */
    probeIntervalMs: Ms(2_000),
    /** Scrape of each replica's /metrics (queue depth, KV usage); 0 turns it off. */
    statsIntervalMs: Ms(1_000, 0),
  }, { default: {}, additionalProperties: false }),
  headers: Type.Object({
    /** x-warmroute-replica and x-warmroute-route on responses. */
    route: Type.Boolean({ default: true }),
    serverTiming: Type.Boolean({ default: true }),
  }, { default: {}, additionalProperties: false }),
  logging: Type.Object({
    level: Type.Union(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l)), { default: 'info' }),
    /** Debug only: include prompt text in debug logs. Never on in production. */
    logPrompts: Type.Boolean({ default: false }),
  }, { default: {}, additionalProperties: false }),
  redis: Type.Object({
    url: Type.Union([Type.String({ pattern: '^rediss?://' }), Type.Null()], { default: null }),
    keyPrefix: Type.String({ default: 'warmroute:' }),
  }, { default: {}, additionalProperties: false }),
}, { additionalProperties: false });

export type Config = Static<typeof ConfigSchema>;
export type UpstreamConfig = Static<typeof UpstreamSchema> & { name: string };
export type ResolvedConfig = Omit<Config, 'upstreams'> & { upstreams: UpstreamConfig[] };
