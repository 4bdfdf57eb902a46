import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { createMetricBatch } from './metric-batch.js';

/** The hops of a request, in order; see DESIGN.md. Up to the first token they partition the TTFT. */
export const HOPS = ['parse', 'route', 'queue', 'connect', 'upstream_headers', 'upstream_first_token', 'stream'] as const;
export type Hop = (typeof HOPS)[number];

// Sub-millisecond resolution where the gateway's own hops live, up to a minute for whole streams.
const HOP_BUCKETS = [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
// KV events arrive within milliseconds on a healthy link; seconds mean a backlog.
const KV_LAG_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
// Turns: fine steps around a 250 ms budget (turns.budgetMs' default), then out to half a minute.
const TURN_WAIT_BUCKETS = [0.025, 0.05, 0.075, 0.1, 0.125, 0.15, 0.175, 0.2, 0.225, 0.25, 0.275, 0.3, 0.35, 0.4, 0.5, 0.6, 0.8, 1, 1.5, 2, 3, 5, 10, 30];
// Calls are whole numbers: bounds halfway between them, so histogram_quantile's interpolation inside
// a bucket reads the integer at its middle (bounds at 1, 2, ... would read a turn of 1 call as 0.5).
const TURN_CALL_BUCKETS = [0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 8.5, 10.5, 15.5, 20.5, 50.5];
const TTFT_BUCKETS = [0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 30];

/** Every metric the gateway exports, defined once, on its own registry (several gateways may share a process in tests). */
export function createMetrics(opts: { defaultMetrics?: boolean } = {}) {
  const registry = new Registry();
  if (opts.defaultMetrics !== false) collectDefaultMetrics({ register: registry, prefix: 'warmroute_process_' });
  const registers = [registry];
  // The per-request series are updated through `batch` (record/record.ts) and folded when read.
  const batch = createMetricBatch();
  const collect = () => batch.fold();

  return {
    registry,
    batch,
    hopDuration: new Histogram({ name: 'warmroute_hop_duration_seconds', help: 'Time spent in each hop of a request: parse, route, queue, connect, upstream_headers (request written → response head), upstream_first_token (response head → first token), stream. The hops up to the first token add up to the TTFT.', labelNames: ['hop'] as const, buckets: HOP_BUCKETS, registers, collect }),
    ttft: new Histogram({ name: 'warmroute_ttft_seconds', help: 'Request received → first token bytes written to the client, by route reason.', labelNames: ['route'] as const, buckets: TTFT_BUCKETS, registers, collect }),
    overhead: new Histogram({ name: 'warmroute_gateway_overhead_seconds', help: 'Time to first token that is not the replica\'s own: parse + route + queue + connect (incl. failed attempts).', buckets: HOP_BUCKETS, registers, collect }),
    requests: new Counter({ name: 'warmroute_requests_total', help: 'Requests, by replica (or "none"), route reason (or "none") and outcome: the status class, "interrupted" (the replica failed after the first byte), "aborted" (the client left) or "stalled" (the client stopped reading, timeouts.clientStallMs).', labelNames: ['replica', 'route', 'code'] as const, registers, collect }),
    decisions: new Counter({ name: 'warmroute_route_decisions_total', help: 'Routing decisions by reason; a request that failed over counts once, as failover.', labelNames: ['reason'] as const, registers, collect }),
    retries: new Counter({ name: 'warmroute_upstream_retries_total', help: 'Attempts abandoned before any response byte and retried on the next replica, by replica and cause.', labelNames: ['replica', 'cause'] as const, registers }),
    streamErrors: new Counter({ name: 'warmroute_stream_errors_total', help: 'Responses that failed after the first byte (ended with an error event or cut off), by replica and cause.', labelNames: ['replica', 'cause'] as const, registers }),
    clientAborts: new Counter({ name: 'warmroute_client_aborts_total', help: 'Client disconnects before the response ended (the upstream request is aborted).', labelNames: ['replica'] as const, registers }),
    clientStalls: new Counter({ name: 'warmroute_client_stalls_total', help: 'Clients that read nothing for timeouts.clientStallMs while their response waited: disconnected, the upstream request aborted.', labelNames: ['replica'] as const, registers }),
    replicaUp: new Gauge({ name: 'warmroute_replica_up', help: '1 when the replica takes traffic, 0 when marked down.', labelNames: ['replica'] as const, registers }),
    inflight: new Gauge({ name: 'warmroute_inflight', help: 'Requests open on each replica through this gateway.', labelNames: ['replica'] as const, registers }),
    queued: new Gauge({ name: 'warmroute_queued', help: 'Requests waiting for admission to each replica (limits.maxInflightPerReplica).', labelNames: ['replica'] as const, registers }),
    globalInflight: new Gauge({ name: 'warmroute_global_inflight', help: 'Requests admitted under the gateway-wide limit (limits.maxConcurrent).', registers }),
    globalQueued: new Gauge({ name: 'warmroute_global_queued', help: 'Requests waiting for the gateway-wide limit (limits.maxConcurrent).', registers }),
    shed: new Counter({ name: 'warmroute_shed_total', help: 'Requests refused for load: 503 with Retry-After when a queue is full or its wait runs out (global_*, replica_*), 429 past an API key\'s own limit (key_limit).', labelNames: ['reason'] as const, registers }),
    apiKeysFileRejected: new Counter({ name: 'warmroute_api_keys_file_rejected_total', help: 'Reads of auth.apiKeysFile not applied (the keys in force stay), by reason: invalid (does not validate), empty (lists no key while it held some: emptied, or read half-written), unreadable (missing, no permission).', labelNames: ['reason'] as const, registers }),
    authFailures: new Counter({ name: 'warmroute_auth_failures_total', help: 'Data-plane requests refused with 401, by reason (missing, invalid).', labelNames: ['reason'] as const, registers }),
    clientRequests: new Counter({ name: 'warmroute_client_requests_total', help: 'Requests by client API key name (when keys are configured) and outcome code.', labelNames: ['key', 'code'] as const, registers, collect }),
    adapterSlotWaits: new Counter({ name: 'warmroute_adapter_slot_waits_total', help: 'Requests for a LoRA adapter sent to a replica where they are expected to wait for a slot (every slot held by other adapters with work in flight, or, where the adapter is not at home, every slot another adapter\'s home): no candidate without that wait had room under the load bound.', labelNames: ['replica'] as const, registers }),
    loraFreeSlots: new Gauge({ name: 'warmroute_replica_lora_free_slots', help: 'LoRA slots (--max-loras) not held by a running adapter, from the replica\'s last vllm:lora_requests_info; -1 when it reports none (LoRA off).', labelNames: ['replica'] as const, registers }),
    adapterLoads: new Counter({ name: 'warmroute_adapter_loads_total', help: 'LoRA adapters the gateway loaded on demand (adapters.sources), by outcome: loaded, failed (the replica refused: 502 to the waiting requests), timeout (adapters.loadTimeoutMs: 502), no_replica (no healthy replica could take it: 503).', labelNames: ['outcome'] as const, registers }),
    adapterLoadDuration: new Histogram({ name: 'warmroute_adapter_load_duration_seconds', help: 'POST /v1/load_lora_adapter sent → answered (one per load, however many requests waited for it), by outcome.', labelNames: ['outcome'] as const, buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60], registers }),
    adapterDirectoryScans: new Counter({ name: 'warmroute_adapter_directory_scans_total', help: 'Listings of adapters.directory, by outcome: listed, failed (unreadable: the adapters last listed stay loadable, a warning).', labelNames: ['outcome'] as const, registers }),
    adapterDirectoryAdapters: new Gauge({ name: 'warmroute_adapter_directory_adapters', help: 'Adapters adapters.directory listed at its last reading (subdirectories with an adapter_config.json).', registers }),
    adapterUnloads: new Counter({ name: 'warmroute_adapter_unloads_total', help: 'LoRA adapters the gateway unloaded to stay within adapters.maxLoadedPerReplica (the least recently used with nothing in flight), by outcome: unloaded, failed, none_idle (every adapter there had requests in flight: the load went ahead past the bound).', labelNames: ['outcome'] as const, registers }),
    adapterRequests: new Counter({ name: 'warmroute_adapter_requests_total', help: 'Requests for a LoRA adapter routed to a replica, by adapter: the adapters.metricsTopN busiest by recent traffic, the rest as "other".', labelNames: ['adapter'] as const, registers }),
    adapterTtft: new Histogram({ name: 'warmroute_adapter_ttft_seconds', help: 'Time to first token as the gateway measured it (request received → first token relayed) of LoRA adapter requests, by adapter (the adapters.metricsTopN busiest, the rest as "other").', labelNames: ['adapter'] as const, buckets: TTFT_BUCKETS, registers }),
    adapterSlotTtft: new Histogram({ name: 'warmroute_adapter_slot_ttft_seconds', help: 'LoRA adapter requests: arrival at the replica (request written) → first token, by what routing believed the request would meet there: running (its adapter runs there), free (a slot was free), wait (every slot held by other adapters).', labelNames: ['slot'] as const, buckets: TTFT_BUCKETS, registers }),
    prefixDrift: new Counter({ name: 'warmroute_prefix_drift_total', help: 'Turns whose prompt no longer extends the session\'s previous turn (its cache is lost from that point), by where the first difference falls: tools (what precedes the messages), system, history.', labelNames: ['where'] as const, registers }),
    turnCalls: new Histogram({ name: 'warmroute_turn_calls', help: 'LLM calls per caller turn (every call of a session ending in the same last user message: classification, extraction, tool loops, the answer), observed when the turn closes.', buckets: TURN_CALL_BUCKETS, registers }),
    turnWait: new Histogram({ name: 'warmroute_turn_wait_seconds', help: 'The caller\'s wait per turn: its first request received → first content token of its last call that produced content.', buckets: TURN_WAIT_BUCKETS, registers }),
    turnLlm: new Histogram({ name: 'warmroute_turn_llm_seconds', help: 'LLM time inside a turn: the sum over its calls of the replica\'s TTFT (request written → first token) and the generation after it.', buckets: TURN_WAIT_BUCKETS, registers }),
    turnsOverBudget: new Counter({ name: 'warmroute_turns_over_budget_total', help: 'Turns whose caller\'s wait was longer than turns.budgetMs.', registers }),
    turns: new Counter({ name: 'warmroute_turns_total', help: 'Caller turns closed, by what closed them: next (the session\'s next user message), idle (nothing for turns.idleMs), evicted (turns.maxSessions).', labelNames: ['closed'] as const, registers }),
    resumes: new Counter({ name: 'warmroute_stream_resumes_total', help: 'Streams that broke off mid-way and were resumed on another replica (resume.enabled), by outcome: resumed, failed, or why it was not tried.', labelNames: ['outcome'] as const, registers }),
    traceSpansDropped: new Counter({ name: 'warmroute_trace_spans_dropped_total', help: 'Spans not delivered to the trace collector (tracing on), by reason: queue_full (the batch processor\'s queue was full: the collector is slower than the traffic, or down) or export_failed (the collector refused the export, did not answer within the export timeout, or could not be reached).', labelNames: ['reason'] as const, registers }),
    // Realtime transcription connections (edge/realtime.ts, upstream/realtime-relay.ts).
    realtimeOpen: new Gauge({ name: 'warmroute_realtime_connections', help: 'Realtime (/v1/realtime WebSocket) connections open on each replica through this gateway.', labelNames: ['replica'] as const, registers }),
    realtimeAccepted: new Counter({ name: 'warmroute_realtime_connections_total', help: 'Realtime connections accepted, by replica and route reason: pinned (the session\'s replica), least_connections (the eligible replica with the fewest open), failover (after a replica failed before session.created).', labelNames: ['replica', 'route'] as const, registers }),
    realtimeRefused: new Counter({ name: 'warmroute_realtime_refused_total', help: 'Realtime upgrades refused with an HTTP status before any WebSocket was accepted, by reason: not_found, bad_request, unauthorized, key_limit, gateway_limit, replica_limit, no_replica, model_not_found, shutting_down, upstream_failed (every replica tried failed before session.created), client_gone.', labelNames: ['reason'] as const, registers }),
    realtimeClosed: new Counter({ name: 'warmroute_realtime_closed_total', help: 'Realtime connections ended, by reason: client (the client closed), replica (the replica closed with a code, passed on), replica_failed (the replica\'s connection was lost: 1011 to the client), idle (realtime.idleMs: 1001), frame_too_large (realtime.maxFrameBytes: 1009), replica_drained (its replica drained past timeouts.drainMs or left the fleet: 1012), shutdown (the gateway stopped: 1001).', labelNames: ['reason'] as const, registers }),
    realtimeReplaced: new Counter({ name: 'warmroute_realtime_replaced_total', help: 'Replicas that failed a realtime connection before its session.created, replaced by the next choice (or the upgrade refused when none was left), by replica and cause: connect, status (answered the upgrade with an HTTP status), timeout (realtime.openMs), closed, protocol (its first message was not session.created, or it selected a subprotocol it was not offered).', labelNames: ['replica', 'cause'] as const, registers }),
    realtimeFirstDelta: new Histogram({ name: 'warmroute_realtime_first_delta_seconds', help: 'Per utterance, per replica: its first input_audio_buffer.commit (the one that starts the transcription) → its first transcription.delta relayed.', labelNames: ['replica'] as const, buckets: TTFT_BUCKETS, registers }),
    realtimeDone: new Histogram({ name: 'warmroute_realtime_done_seconds', help: 'Per utterance, per replica: its last input_audio_buffer.commit (the final one, which ends its audio) → its transcription.done relayed.', labelNames: ['replica'] as const, buckets: TTFT_BUCKETS, registers }),
    voiceTurnGap: new Histogram({ name: 'warmroute_voice_turn_gap_seconds', help: 'One voice turn, both halves: the caller\'s transcription.done relayed on a realtime connection → the first token of the next chat or Messages request of the same session key.', buckets: TURN_WAIT_BUCKETS, registers }),
    promptTokens: new Counter({ name: 'warmroute_prompt_tokens_total', help: 'Prompt tokens reported by replicas in usage.', labelNames: ['replica'] as const, registers, collect }),
    cachedTokens: new Counter({ name: 'warmroute_cached_tokens_total', help: 'Prompt tokens the replica served from its prefix cache (usage.prompt_tokens_details.cached_tokens).', labelNames: ['replica'] as const, registers, collect }),
    healthTransitions: new Counter({ name: 'warmroute_replica_state_changes_total', help: 'Replica up/down transitions, by cause.', labelNames: ['replica', 'to', 'cause'] as const, registers }),
    scrapeErrors: new Counter({ name: 'warmroute_replica_scrape_errors_total', help: 'Failed scrapes of a replica\'s /metrics or /v1/models; routing then uses stale load figures.', labelNames: ['replica', 'what'] as const, registers }),
    storeErrors: new Counter({ name: 'warmroute_store_errors_total', help: 'Shared session store (Redis) operations that failed or were skipped while it was unreachable, by store (sessions: pins; responses: stored-response records) and operation; routing goes on from the local view.', labelNames: ['store', 'op'] as const, registers }),
    storeEvents: new Counter({ name: 'warmroute_store_events_total', help: 'Shared session store (Redis) activity, by store (sessions, responses) and event: pin changes published, TTL refreshes, other gateways\' pins applied, background lookups filled or dropped, writes resynced after an outage, placements lost, refreshes that found a move, read-backs after a pub/sub gap and the pins they corrected, stored-response records read before routing (fetched, fetch_missed).', labelNames: ['store', 'event'] as const, registers }),
    ejections: new Counter({ name: 'warmroute_replica_ejections_total', help: 'Replicas ejected by passive outlier detection (consecutive 5xx / header timeouts, or connect failures from real traffic), by cause.', labelNames: ['replica', 'cause'] as const, registers }),
    ejectionsSkipped: new Counter({ name: 'warmroute_replica_ejections_skipped_total', help: 'Ejections not made because outlier.maxEjectionPercent of the fleet was already ejected, by cause.', labelNames: ['cause'] as const, registers }),
    scrapeAge: new Gauge({ name: 'warmroute_replica_scrape_age_seconds', help: 'Age of the last good scrape of each replica\'s /metrics (-1 before the first): past a few scrape intervals its load figures are stale.', labelNames: ['replica'] as const, registers }),
    warmStateForgotten: new Counter({ name: 'warmroute_replica_warm_state_forgotten_total', help: 'Times routing forgot what it believed warm on a replica (prefix index, pins): restart (seen in its /metrics), long_outage (down longer than the prefix TTL), removed (left the fleet).', labelNames: ['replica', 'cause'] as const, registers }),
    handoffs: new Counter({ name: 'warmroute_handoffs_total', help: 'Pinned sessions moved off a draining replica: warmed (last prompt replayed to the next choice first), cold (nothing to replay, or handoff off), failed (the replay failed: moved cold), no_target (no other replica).', labelNames: ['outcome'] as const, registers }),
    tokenRatioProbes: new Counter({ name: 'warmroute_token_ratio_probes_total', help: 'One /tokenize of a fixed text when a replica\'s models are first read, so placement knows the replica\'s tokens per estimated token before any answer: learned, unsupported (no usable endpoint: learnt from answers only) or failed.', labelNames: ['replica', 'outcome'] as const, registers }),
    warmups: new Counter({ name: 'warmroute_warmups_total', help: 'Replicas sent the hottest shared prefixes before taking sessions, by reason (join, restart, long_outage) and outcome: done, or incomplete (a replay failed or the warmup ran out of time: the replica takes sessions anyway).', labelNames: ['reason', 'outcome'] as const, registers }),
    fleetChanges: new Counter({ name: 'warmroute_fleet_changes_total', help: 'Replicas that joined or left the fleet (DNS discovery, config reload), drains started, and name_conflict: an address already in the fleet through another upstream (it stays with that upstream).', labelNames: ['change'] as const, registers }),
    discoveryFallbacks: new Counter({ name: 'warmroute_discovery_fallbacks_total', help: 'DNS refreshes of a dns:// upstream that kept the last known addresses, by reason: lookup_failed (the resolver failed) or empty_answer (the name suddenly resolves to nothing).', labelNames: ['reason'] as const, registers }),
    configReloads: new Counter({ name: 'warmroute_config_reloads_total', help: 'Configuration reloads (SIGHUP, file change), by result: applied or rejected (the old one stays).', labelNames: ['result'] as const, registers }),
    storeUp: new Gauge({ name: 'warmroute_store_up', help: '1 while the session store is reachable (always, for the in-memory one), 0 while routing runs from the local view only; by store: sessions (pins), responses (stored-response records).', labelNames: ['store'] as const, registers }),
    draining: new Gauge({ name: 'warmroute_draining', help: '1 while the gateway drains on shutdown.', registers }),
    // Filled at scrape time by the gateway (server.ts): counting pins walks the session store.
    sessionsPinned: new Gauge({ name: 'warmroute_sessions_pinned', help: 'Live session pins per replica (the affinity balance across replicas).', labelNames: ['replica'] as const, registers }),
    prefixEntries: new Gauge({ name: 'warmroute_prefix_index_entries', help: 'Entries (chain link × replica) in the prefix index.', registers }),
    stateLost: new Counter({ name: 'warmroute_state_lost_total', help: 'Requests that needed a stored response (Responses API previous_response_id, /v1/responses/{id}) and could not go to the replica holding it, by reason: down, draining, removed (from the fleet), restarted (stored before its current process started), unknown (an id this gateway never saw: routed as usual).', labelNames: ['reason'] as const, registers }),
    responseIdsUnread: new Counter({ name: 'warmroute_response_ids_unread_total', help: 'Stored Responses API responses relayed whose id the gateway could not read (not in response.created, nor leading the JSON body): follow-ups to them are routed as unknown.', registers }),
    // What routing believes each cache holds, and how wrong it is (issue 16).
    workingSet: new Gauge({ name: 'warmroute_replica_working_set_tokens', help: 'Estimated working set of each replica: the distinct prefix tokens of the sessions placed there and recently active, a shared prompt counted once.', labelNames: ['replica'] as const, registers }),
    kvCapacity: new Gauge({ name: 'warmroute_replica_kv_capacity_tokens', help: 'KV cache capacity of each replica in tokens (vllm:cache_config_info num_gpu_blocks × block_size); -1 while unknown.', labelNames: ['replica'] as const, registers }),
    retention: new Gauge({ name: 'warmroute_replica_retention_seconds', help: 'How long routing believes each replica keeps an unused prefix: routing.options.prefixTtlMs at first, lowered when it served fewer cached tokens than predicted, raised when an old prefix was still served. Prefixes matched to engine blocks of a live KV event stream do not expire by age at all (they go when the events say so).', labelNames: ['replica'] as const, registers }),
    cachedPredicted: new Counter({ name: 'warmroute_cached_tokens_predicted_total', help: 'Cached prompt tokens the prefix index predicted on the replica chosen, over requests whose usage reported cached tokens (in the replica\'s tokens). Against warmroute_cached_tokens_predicted_served_total: the index\'s error.', labelNames: ['replica'] as const, registers }),
    cachedPredictedServed: new Counter({ name: 'warmroute_cached_tokens_predicted_served_total', help: 'Cached prompt tokens the replica actually served, over the same requests as warmroute_cached_tokens_predicted_total.', labelNames: ['replica'] as const, registers }),
    cachedOverpredicted: new Counter({ name: 'warmroute_cached_tokens_overpredicted_total', help: 'Predicted cached tokens the replica did not serve (predicted − served where positive): what the index believed warm but was evicted.', labelNames: ['replica'] as const, registers }),
    residencyEvictions: new Counter({ name: 'warmroute_residency_evictions_total', help: 'Evictions routing learnt of, by source: feedback (a response served fewer cached tokens than predicted: one per response) or events (chain links whose engine block a KV BlockRemoved named).', labelNames: ['replica', 'source'] as const, registers }),
    kvEvents: new Counter({ name: 'warmroute_kv_events_total', help: 'KV cache events read from each replica\'s publisher (of the tier counted, kvEvents.medium), by type: stored, removed, cleared.', labelNames: ['replica', 'type'] as const, registers }),
    kvEventLag: new Histogram({ name: 'warmroute_kv_event_lag_seconds', help: 'Publish timestamp of a KV event batch → read by the gateway (includes clock skew between hosts).', labelNames: ['replica'] as const, buckets: KV_LAG_BUCKETS, registers }),
    kvEventGaps: new Counter({ name: 'warmroute_kv_event_gaps_total', help: 'Gaps in a replica\'s KV event sequence (batches missed: a slow reader past the publisher\'s high-water mark, a reconnect).', labelNames: ['replica'] as const, registers }),
    kvEventReplays: new Counter({ name: 'warmroute_kv_event_replays_total', help: 'Replays asked of a replica\'s replay socket after a gap, by outcome: ok, failed, timeout, incomplete (the publisher no longer had the start), overflow (too many live batches meanwhile), none (no replay endpoint).', labelNames: ['replica', 'outcome'] as const, registers }),
    kvEventErrors: new Counter({ name: 'warmroute_kv_event_errors_total', help: 'KV event messages that could not be used, by reason: frames, sequence, msgpack, shape, unknown_event, undecodable_event (an event of a known kind that would not decode: skipped, the rest of its batch applied), socket, replay, apply.', labelNames: ['replica', 'reason'] as const, registers }),
    kvStreamChanges: new Counter({ name: 'warmroute_kv_event_stream_changes_total', help: 'Changes of a replica\'s KV event stream: live (in sequence: exact residency), restarted (the sequence went back: the engine restarted, its cache starts empty), lost (a gap no replay filled: the links matched there are forgotten), proving (in order again after a loss, not exact until it has delivered a few batches in a row).', labelNames: ['replica', 'state'] as const, registers }),
    kvStreamLive: new Gauge({ name: 'warmroute_kv_event_stream_live', help: '1 while every data-parallel rank\'s KV event stream of a replica is in sequence (the links matched to its engine blocks are exact), 0 otherwise.', labelNames: ['replica'] as const, registers }),
    kvBlockMapping: new Counter({ name: 'warmroute_kv_block_mapping_total', help: 'Served requests mapped to the replica\'s engine blocks from the KV events that followed, by outcome: learned, none (no block at the prompt\'s depth stored since: a full cache hit, or events late), ambiguous (several, none of the conversation\'s lineage), short (under one block), unknown_replica (no stored event yet).', labelNames: ['replica', 'outcome'] as const, registers }),
    // Filled at scrape time, like the pins.
    kvBlocks: new Gauge({ name: 'warmroute_kv_event_blocks', help: 'Engine blocks each replica\'s KV events say it holds (as far as this gateway has seen), bounded over the whole fleet by kvEvents.maxBlocks.', labelNames: ['replica'] as const, registers }),
    // The tool-call guard (stream/tool-calls.ts, edge/tool-guard.ts); model: a served model name, or none.
    toolCallsTruncated: new Counter({ name: 'warmroute_tool_calls_truncated_total', help: 'Answers to requests offering tools that ended on their length (finish_reason "length"; stop_reason "max_tokens" for Anthropic Messages) while a tool call\'s arguments were still open (not valid JSON), by model.', labelNames: ['model'] as const, registers }),
    toolMaxTokensRaised: new Counter({ name: 'warmroute_tool_max_tokens_raised_total', help: 'Requests offering tools whose max_tokens / max_completion_tokens was raised to tools.minMaxTokens before forwarding, by the field raised.', labelNames: ['field'] as const, registers }),
    classRequests: new Counter({ name: 'warmroute_class_requests_total', help: 'Requests by priority class (interactive, batch: queue/priority.ts) and outcome code (as warmroute_requests_total).', labelNames: ['class', 'code'] as const, registers, collect }),
    batchPrefillWaits: new Counter({ name: 'warmroute_batch_prefill_waits_total', help: 'Batch requests that waited for a replica with its slots free, held by limits.batchPrefillPerReplica (an interactive request there awaited its first token, or that many batch requests did), by replica.', labelNames: ['replica'] as const, registers }),
    classTtft: new Histogram({ name: 'warmroute_class_ttft_seconds', help: 'Time to first token as the gateway measured it (request received → first token relayed), by priority class.', labelNames: ['class'] as const, buckets: TTFT_BUCKETS, registers, collect }),
    replicaConfigMismatch: new Gauge({ name: 'warmroute_replica_config_mismatch', help: '1 while a replica is configured unlike the rest of the fleet on a setting (from vllm:cache_config_info and /v1/models): prefix_caching (off), block_size, cache_dtype, kv_capacity (over 10% off the median), max_model_len, model (other weights behind the same served name); 0 otherwise.', labelNames: ['replica', 'setting'] as const, registers }),
    // Filled at scrape time, like the pins.
    responseRecords: new Gauge({ name: 'warmroute_response_records', help: 'Stored-response records (response id → replica) this gateway holds.', registers }),
  };
}

export type Metrics = ReturnType<typeof createMetrics>;

/**
 * Removes every series labelled with a replica that left the fleet: with DNS discovery names come
 * and go (a restarted pod is a new address), and their series would otherwise pile up for good.
 */
export async function removeReplicaSeries(m: Metrics, replica: string): Promise<void> {
  for (const metric of Object.values(m)) {
    if (!(metric instanceof Counter || metric instanceof Gauge || metric instanceof Histogram)) continue;
    const series = metric as Counter | Gauge | Histogram;
    const { values } = await series.get();
    for (const v of values) {
      const labels: Record<string, string | number | undefined> = { ...v.labels };
      if (labels.replica !== replica) continue;
      // A histogram's bucket values carry `le` on top of the metric's own labels.
      delete labels.le;
      series.remove(labels);
    }
  }
}
