/**
 * Attribute names: the GenAI and HTTP semantic conventions where they define one, `warmroute.*`
 * where they do not. Written out rather than imported from the conventions' incubating entry,
 * which loads every attribute of every convention.
 */
export const A = {
  httpMethod: 'http.request.method',
  httpStatus: 'http.response.status_code',
  httpRoute: 'http.route',
  errorType: 'error.type',
  serverAddress: 'server.address',
  serverPort: 'server.port',
  operation: 'gen_ai.operation.name',
  requestModel: 'gen_ai.request.model',
  responseModel: 'gen_ai.response.model',
  inputTokens: 'gen_ai.usage.input_tokens',
  outputTokens: 'gen_ai.usage.output_tokens',
  cacheReadTokens: 'gen_ai.usage.cache_read.input_tokens',
  timeToFirstChunk: 'gen_ai.response.time_to_first_chunk',
  routeReason: 'warmroute.route.reason',
  replica: 'warmroute.replica',
  /** On the SERVER span, for the first attempt it carried: server.address there would name the gateway itself. */
  replicaAddress: 'warmroute.replica.address',
  replicaPort: 'warmroute.replica.port',
  predictedCached: 'warmroute.cached_tokens.predicted',
  queueWaitMs: 'warmroute.queue.wait_ms',
  attempts: 'warmroute.attempts',
  attempt: 'warmroute.attempt',
  attemptKind: 'warmroute.attempt.kind',
  outcome: 'warmroute.outcome',
  session: 'warmroute.session',
  turn: 'warmroute.turn',
  turnCall: 'warmroute.turn.call',
  overheadMs: 'warmroute.overhead_ms',
  /** Present (true) when the answer ended on its length with a tool call's arguments still open. */
  toolCallsTruncated: 'warmroute.tool_calls.truncated',
  /** On each hop's event: the hop's duration in ms, as the histogram observed it. */
  hopMs: 'warmroute.hop.duration_ms',
  link: 'warmroute.link',
  /** The adapter version chosen for the client's model name (adapters.versions). */
  adapterVersion: 'warmroute.adapter.version',
  /** On the adapter load event: the replica, the adapter, the outcome and the wait. */
  adapter: 'warmroute.adapter',
  adapterOutcome: 'warmroute.adapter.outcome',
  adapterLoadMs: 'warmroute.adapter.load_ms',
  /** A voice turn's reply: the caller's transcription.done (realtime) → this request's first token, ms. */
  voiceTurnGapMs: 'warmroute.voice_turn.gap_ms',
} as const;

/** Event names on the SERVER span besides the hops. */
export const EVENT = {
  /** The first attempt (the SERVER span's own context went to its replica) failed before a response. */
  attemptFailed: 'attempt_failed',
  /** The request waited for its LoRA adapter to be loaded on its replica (adapters.sources). */
  adapterLoad: 'warmroute.adapter.load',
} as const;

/** gen_ai.operation.name by request kind: the Responses API and Anthropic Messages are chats too. */
export const OPERATION_OF: Readonly<Record<string, string>> = { chat: 'chat', responses: 'chat', messages: 'chat', completion: 'text_completion' };
