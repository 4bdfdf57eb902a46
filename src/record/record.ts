import type { Logger } from 'pino';
import type { WarmrouteError } from '../errors.js';
import type { RequestIdentity } from '../identify/identity.js';
import type { Drift } from '../routing/drift.js';
import type { AdapterSlotBelief, RouteReason, Router } from '../routing/types.js';
import { createAdapterLabels } from './adapter-labels.js';
import type { Usage } from '../stream/usage.js';
import { hopsOf, overheadOf, replicaTtftOf, ttftOf, type HopClock } from '../telemetry/hop-clock.js';
import { HOPS, type Metrics } from '../telemetry/metrics.js';
import type { SessionTagger } from '../telemetry/session-tag.js';
import { throttle } from '../telemetry/throttle.js';
import type { RequestTrace } from '../telemetry/tracing/request-trace.js';
import type { FirstToken } from '../stream/tap.js';
import type { TurnCall, TurnPlace, Turns } from './turns.js';
import type { ToolCallEnd } from '../stream/tool-calls.js';
import type { PriorityClass } from '../queue/priority.js';
import type { Ending } from '../upstream/forward.js';
import type { SpeechEnd, VoiceTurns } from './voice-turns.js';

/** How a request ended, whether or not it was routed. */
export interface Ended {
  readonly ending: Ending;
  readonly status: number;
  readonly replica: string | null;
  /** null: never routed (refused by the edge, or no replica fit). */
  readonly reason: RouteReason | null;
  readonly attempts: number;
  readonly usage: Usage | null;
  readonly sse: boolean;
  readonly done: boolean;
  readonly error: WarmrouteError | null;
  readonly upstreamError: string | null;
  /** Responses API: the id of the response relayed (its replica stores it). */
  readonly responseId?: string | null;
  /** A stream's first token: content, reasoning or a tool call (what its TTFT ended on). */
  readonly firstToken?: FirstToken | null;
  /** A request offering tools: whether its answer ended with a tool call cut on its length. */
  readonly toolCall?: ToolCallEnd | null;
  /** What the tool-call guard raised before forwarding (`max_tokens=256`). */
  readonly adjusted?: string | null;
}

/** The `code` label of warmroute_requests_total. */
function outcomeLabel(e: Ended): string {
  if (e.ending === 'aborted') return 'aborted';
  if (e.ending === 'interrupted') return 'interrupted';
  if (e.ending === 'stalled') return 'stalled';
  return e.status >= 100 ? `${Math.floor(e.status / 100)}xx` : 'none';
}

function memo<T>(make: (key: string) => T): (key: string) => T {
  const made = new Map<string, T>();
  return (key) => {
    let v = made.get(key);
    if (v === undefined) made.set(key, (v = make(key)));
    return v;
  };
}

const ms = (v: number | null) => (v === null ? undefined : Math.round(v * 1000) / 1000);
const some = <T>(v: T | null | undefined) => (v === null ? undefined : v);

/**
 * The one access line: only the fields that have a value (a /v1/models line is a handful, a
 * stream's a couple of dozen). A field the request never reached is absent, not null: fewer bytes
 * per line, and a reader sees what happened. Built as one object literal of one shape for every
 * request, its absent fields undefined (pino writes no undefined field), rather than a field added
 * at a time: one allocation and one hidden class instead of a chain of them.
 */
function accessLine(method: string, path: string, key: string | null, priority: PriorityClass | null, identity: RequestIdentity | null, e: Ended, place: TurnPlace | null,
  ttft: number | null, overhead: number | null, replicaTtft: number | null, hops: ReturnType<typeof hopsOf>, sessionTag: SessionTagger, truncated: boolean, adapter: AdapterNote | null, voiceGap: number | null): Record<string, unknown> {
  const keyed = identity !== null && identity.sessionKey !== null;
  const u = e.usage;
  const err = e.error;
  return {
    method, path, key: some(key), priority: some(priority), status: e.status, outcome: e.ending,
    replica: some(e.replica), route: some(e.reason), attempts: e.attempts,
    session: keyed ? sessionTag(identity.sessionKey) : undefined,
    sessionSource: keyed ? identity.sessionKeySource : undefined,
    // A keyless conversation's tag (the key its record is kept under: the opening's placement key,
    // then its own conversation key), for GET /admin/sessions/{tag}; never the key.
    conversation: identity !== null && !keyed && identity.placementKey !== null ? sessionTag(identity.conversationKey ?? identity.placementKey) : undefined,
    // Only a model some replica serves (the request was routed): otherwise it is the client's text.
    model: identity !== null && e.reason !== null ? some(identity.model) : undefined,
    // The configured client model name a version was chosen for, and the load the request waited for.
    requestedModel: adapter?.requested ?? undefined, adapterLoadMs: adapter?.loadMs ?? undefined,
    turn: place?.turn, call: place?.call,
    stream: e.sse, ttftMs: ms(ttft), firstToken: e.firstToken || undefined, toolCallTruncated: truncated || undefined, adjusted: e.adjusted || undefined,
    overheadMs: ms(overhead),
    // Flat numbers, not a nested object: pino serialises nested objects on a much slower path.
    parseMs: ms(hops.parse), routeMs: ms(hops.route), queueMs: ms(hops.queue), connectMs: ms(hops.connect),
    upstreamHeadersMs: ms(hops.upstream_headers), upstreamFirstTokenMs: ms(hops.upstream_first_token), streamMs: ms(hops.stream),
    replicaTtftMs: ms(replicaTtft),
    // One voice turn: the caller's transcription.done on a realtime connection → this reply's first token.
    voiceGapMs: ms(voiceGap),
    promptTokens: u === null ? undefined : some(u.promptTokens),
    cachedTokens: u === null ? undefined : some(u.cachedTokens),
    completionTokens: u === null ? undefined : some(u.completionTokens),
    done: e.sse ? e.done : undefined,
    err: err === null ? undefined : err.openaiCode,
    // Messages that quote what the client sent (a model name, a path) stay out of the log.
    detail: err === null || err.quotesClient ? undefined : err.message,
    upstreamError: some(e.upstreamError),
  };
}

/** The request kinds that answer a caller: the reply of a voice turn. */
const CONVERSATIONAL: ReadonlySet<string> = new Set(['chat', 'messages', 'responses']);

/** How many sessions' tags are kept: a session's every request after its first skips the HMAC. */
const REMEMBERED_TAGS = 4096;

/** A session's tag is the same on every request (an HMAC of its key): computed once, kept in a bounded map (oldest out first). */
function rememberedTags(tag: SessionTagger): SessionTagger {
  const tags = new Map<string, string | null>();
  return (key) => {
    if (key === null) return null;
    let t = tags.get(key);
    if (t === undefined) {
      t = tag(key);
      if (tags.size >= REMEMBERED_TAGS) tags.delete(tags.keys().next().value!);
      tags.set(key, t);
    }
    return t;
  };
}

/** What the gateway did about a request's LoRA adapter: the version it chose for a configured client model name, the load it waited for. */
export interface AdapterNote {
  /** The client's model name (one of adapters.versions) when a version was chosen; the identity's model is the version. */
  requested: string | null;
  /** The load on demand this request waited for, ms. */
  loadMs: number | null;
  /** The adapter the request was routed for (a version's name when one was chosen); null when routing saw no adapter. */
  adapter: string | null;
  /** What routing believed it would meet on its replica: its adapter running, a free slot, a wait; null when the replica reports no slots. */
  slot: AdapterSlotBelief | null;
}

export interface Recorder {
  /** The session key's tag in every log line (keyed: telemetry/session-tag.ts). */
  readonly sessionTag: SessionTagger;
  /** A session's prompt stopped extending its previous turn: counted, and one warn line (no text). */
  drift(identity: RequestIdentity, drift: Drift): void;
  /** A LoRA adapter's request sent where it will wait for a slot (no replica without the wait had room): counted, and a warn line at most once a minute. */
  slotWait(identity: RequestIdentity, replica: string): void;
  /** A request routed: its call in its session's caller turn (record/turns.ts), handed back to `record`; null: none. */
  arrived(identity: RequestIdentity, clock: HopClock): TurnCall | null;
  /** A keyed conversational request routed: the caller's speech end (realtime) it answers, taken; null: none. */
  voiceArrived(identity: RequestIdentity, clock: HopClock): SpeechEnd | null;
  /**
   * `key`: the client API key's name, when keys are configured; `trace`: its spans (tracing on), ended here;
   * `priority`: the request's class (queue/priority.ts), null when refused before its body was read;
   * `turn`: what `arrived` returned.
   */
  record(x: { method: string; path: string; identity: RequestIdentity | null; clock: HopClock; ended: Ended; key?: string | null; trace?: RequestTrace | null; priority?: PriorityClass | null; turn?: TurnCall | null; adapter?: AdapterNote | null; voice?: SpeechEnd | null }): void;
}

/**
 * Everything that happens once per request after it ended: hop metrics, TTFT, overhead, the
 * request and decision counters, token counters, the router's feedback and the one access log
 * line.
 */
export function createRecorder(deps: { metrics: Metrics; log: Logger; router: Router; sessionTag: SessionTagger; turns?: Turns; adapterTopN?: () => number; voice?: VoiceTurns }): Recorder {
  const { metrics: m, log, router, turns, voice: voiceTurns } = deps;
  // Per-adapter series: the busiest adapters.metricsTopN by name, the rest as `other`.
  const adapterLabels = createAdapterLabels({
    topN: deps.adapterTopN ?? (() => 10),
    dropped: (adapter) => { m.adapterRequests.remove({ adapter }); m.adapterTtft.remove({ adapter }); },
  });
  const sessionTag = rememberedTags(deps.sessionTag);
  // The per-request series go through the metric batch (telemetry/metric-batch.ts): plain numbers
  // per request, folded into prom-client when the registry is read. Each series is bound once and
  // kept (every label set here is bounded: replicas, reasons, outcomes, classes, key names).
  const batch = m.batch;
  const hop = HOPS.map((h) => batch.histogram(m.hopDuration, { hop: h }));
  const overheadSeries = batch.histogram(m.overhead);
  const ttftBy = memo((route) => batch.histogram(m.ttft, { route }));
  const requestsBy = memo((key) => { const [replica, route, code] = key.split(' '); return batch.counter(m.requests, { replica, route, code }); });
  const decisionsBy = memo((reason) => batch.counter(m.decisions, { reason }));
  const promptBy = memo((replica) => batch.counter(m.promptTokens, { replica }));
  const cachedBy = memo((replica) => batch.counter(m.cachedTokens, { replica }));
  const clientBy = memo((k) => { const [key, code] = k.split(' '); return batch.counter(m.clientRequests, { key, code }); });
  const driftBy = memo((where) => m.prefixDrift.labels(where));
  const classBy = memo((k) => { const [cls, code] = k.split(' '); return batch.counter(m.classRequests, { class: cls, code }); });
  const classTtftBy = memo((cls) => batch.histogram(m.classTtft, { class: cls }));
  // A routed request's model is one a replica serves; the cap is a second bound (a replica whose model list is not read yet keeps any).
  const modelNames = new Set<string>();
  const truncatedBy = memo((model) => m.toolCallsTruncated.labels(model));
  const modelLabel = (model: string | null | undefined) => {
    if (model === null || model === undefined) return 'none';
    if (!modelNames.has(model) && modelNames.size >= 64) return 'other';
    modelNames.add(model);
    return model;
  };
  const unreadWarning = throttle(60_000);
  const stallWarning = throttle(60_000);
  // A client that puts the time in its system prompt drifts on every turn: counted every time,
  // logged at most once a minute (with how many were not), never a second line per request.
  const driftWarning = throttle(60_000);
  const slotWaitWarning = throttle(60_000);
  return {
    sessionTag,
    arrived: (identity, clock) => turns?.arrived(identity, clock) ?? null,
    voiceArrived(identity, clock) {
      if (voiceTurns === undefined || identity.sessionKey === null || !CONVERSATIONAL.has(identity.kind)) return null;
      return voiceTurns.claim(identity.sessionKey, clock.received);
    },
    drift(identity, d) {
      driftBy(d.where).inc();
      const suppressed = driftWarning();
      if (suppressed === null) return;
      log.warn({ session: sessionTag(identity.sessionKey ?? identity.placementKey), sessionSource: identity.sessionKeySource, where: d.where, message: d.message, suppressed }, 'prompt drift: this turn no longer extends the session\'s previous prompt, so its cache is lost from there');
    },
    slotWait(identity, replica) {
      m.adapterSlotWaits.inc({ replica });
      const suppressed = slotWaitWarning();
      if (suppressed === null) return;
      log.warn({ replica, session: sessionTag(identity.sessionKey ?? identity.placementKey), suppressed }, 'adapter request sent where it waits for a LoRA slot: every replica serving it without that wait is past the load bound, or none has a slot free');
    },
    record({ method, path, identity, clock, ended: e, key = null, trace = null, priority = null, turn = null, adapter = null, voice = null }) {
      const voiceGap = voice !== null && clock.firstToken > 0 ? clock.firstToken - voice.at : null;
      if (voiceGap !== null) m.voiceTurnGap.observe(voiceGap / 1000);
      const place = turn === null ? null : turns?.ended(turn, clock, e.responseId ?? null) ?? null;
      const hops = hopsOf(clock);
      for (let i = 0; i < HOPS.length; i++) {
        const v = hops[HOPS[i]];
        if (v !== null) hop[i].observe(v / 1000);
      }
      const ttft = ttftOf(clock);
      const overhead = e.replica !== null ? overheadOf(clock) : null;
      const replicaTtft = replicaTtftOf(clock);
      const route = e.reason ?? 'none';
      if (ttft !== null) ttftBy(route).observe(ttft / 1000);
      if (overhead !== null) overheadSeries.observe(overhead / 1000);
      const replica = e.replica ?? 'none';
      const code = outcomeLabel(e);
      requestsBy(`${replica} ${route} ${code}`).inc();
      if (key !== null) clientBy(`${key} ${code}`).inc();
      if (priority !== null) {
        classBy(`${priority} ${code}`).inc();
        if (ttft !== null) classTtftBy(priority).observe(ttft / 1000);
      }
      if (e.reason !== null) decisionsBy(e.reason).inc();
      if (adapter !== null && adapter.adapter !== null && e.replica !== null) {
        const label = adapterLabels.label(adapter.adapter);
        m.adapterRequests.inc({ adapter: label });
        if (ttft !== null) m.adapterTtft.observe({ adapter: label }, ttft / 1000);
        if (adapter.slot !== null && replicaTtft !== null) m.adapterSlotTtft.observe({ slot: adapter.slot }, replicaTtft / 1000);
      }
      const u = e.usage;
      if (u && e.replica) {
        if (u.promptTokens !== null) promptBy(replica).inc(u.promptTokens);
        if (u.cachedTokens !== null) cachedBy(replica).inc(u.cachedTokens);
      }
      // A client that stopped reading held a replica slot and a vLLM sequence until it was cut: loud.
      if (e.ending === 'stalled') {
        m.clientStalls.inc({ replica });
        const suppressed = stallWarning();
        if (suppressed !== null) log.warn({ replica: e.replica, detail: e.error?.message, suppressed }, 'client stopped reading: disconnected, its upstream request aborted');
      }
      // A tool call cut mid-JSON reaches the client as arguments it cannot use: loud, each one (with the id vLLM logs it under).
      const truncated = e.toolCall?.truncated === true;
      if (truncated) {
        const model = e.reason !== null ? identity?.model ?? null : null;
        truncatedBy(modelLabel(model)).inc();
        log.warn({ replica: e.replica, model, requestId: e.toolCall!.responseId, session: sessionTag(identity?.sessionKey ?? null), stream: e.sse }, 'tool call cut by the token limit (finish_reason "length", or stop_reason "max_tokens", with a call unfinished): the client got no usable tool call');
      }
      // A stored response whose id could not be read cannot be followed up on its replica: loud.
      if (identity?.storesResponse && e.ending === 'complete' && e.status >= 200 && e.status < 300 && !e.responseId) {
        m.responseIdsUnread.inc();
        const suppressed = unreadWarning();
        if (suppressed !== null) log.warn({ replica: e.replica, stream: e.sse, suppressed }, 'stored response relayed without a readable id: its follow-ups will be routed as unknown');
      }
      // Neither a client that left nor one that stopped reading says anything about its replica.
      if (identity !== null && e.replica !== null && e.ending !== 'aborted' && e.ending !== 'stalled') {
        router.served(identity, {
          replica: e.replica,
          result: e.ending === 'interrupted' ? 'interrupted' : e.ending === 'complete' && e.status < 400 ? 'ok' : 'error',
          replicaTtftMs: replicaTtft,
          promptTokens: u?.promptTokens ?? null,
          cachedTokens: u?.cachedTokens ?? null,
          responseId: e.responseId ?? null,
        });
      }
      if (log.isLevelEnabled('info')) log.info(accessLine(method, path, key, priority, identity, e, place, ttft, overhead, replicaTtft, hops, sessionTag, truncated, adapter, voiceGap), 'request');
      // The spans are built from the same clock readings as the histograms above.
      if (trace) {
        const session = sessionTag(identity?.sessionKey ?? null);
        trace.end(clock, {
          method, path, status: e.status, outcome: e.ending, replica: e.replica, reason: e.reason, attempts: e.attempts,
          kind: identity?.kind ?? null, model: e.reason !== null ? identity?.model ?? null : null,
          promptTokens: u?.promptTokens ?? null, completionTokens: u?.completionTokens ?? null, cachedTokens: u?.cachedTokens ?? null,
          session, turnKey: place === null || identity === null ? null : session ?? sessionTag(identity.placementKey),
          turn: place?.turn ?? null, call: place?.call ?? null, errorCode: e.error?.openaiCode ?? null, toolCallTruncated: truncated,
          requestedModel: e.reason !== null ? adapter?.requested ?? null : null,
          voice: voiceGap === null ? null : { link: voice!.link, gapMs: voiceGap },
        });
      }
    },
  };
}
