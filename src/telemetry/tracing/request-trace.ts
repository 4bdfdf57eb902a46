import type { IncomingHttpHeaders } from 'node:http';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Span, type SpanContext, type Tracer } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { hopsOf, overheadOf, ttftOf, type HopClock } from '../hop-clock.js';
import { HOPS } from '../metrics.js';
import { A, EVENT, OPERATION_OF } from './attributes.js';

/** What an exchange's end says, in plain values (the layers above hand them down). */
export interface TraceFacts {
  readonly method: string;
  readonly path: string;
  readonly status: number;
  /** complete, failed, interrupted, aborted, stalled. */
  readonly outcome: string;
  readonly replica: string | null;
  /** null: never routed. */
  readonly reason: string | null;
  readonly attempts: number;
  readonly kind: string | null;
  /** Only a model some replica serves (the request was routed): never the client's free text. */
  readonly model: string | null;
  readonly promptTokens: number | null;
  readonly completionTokens: number | null;
  readonly cachedTokens: number | null;
  /** The session key's keyed tag (as in the access line), never the key. */
  readonly session: string | null;
  /** The caller turn's identity for links (a keyed tag), its number and this call's index in it. */
  readonly turnKey: string | null;
  readonly turn: number | null;
  readonly call: number | null;
  /** The error's code when the gateway answered with one. */
  readonly errorCode: string | null;
  /** A tool call cut by the token limit (stream/tool-calls.ts). */
  readonly toolCallTruncated: boolean;
  /** The client's model name when the gateway chose an adapter version for it (adapters.versions); `model` is the version. */
  readonly requestedModel?: string | null;
  /** One voice turn's reply: the caller's speech end on a realtime connection (its span), and the gap to this request's first token. */
  readonly voice?: { readonly link: SpanContext | null; readonly gapMs: number } | null;
}

export interface AttemptTarget {
  readonly replica: string;
  /** The replica's origin (scheme://host:port). */
  readonly origin: string;
  /** Its index among the exchange's attempts, from 0. */
  readonly index: number;
  /** A continuation of a stream that broke off (resume.enabled). */
  readonly resume: boolean;
  /** The same replica again, once the on-demand adapter it no longer had was loaded there again. */
  readonly reload?: boolean;
}

/**
 * One exchange's spans: its SERVER span, which is also the first attempt's (its context goes to the
 * first replica, so that replica's span is its child), a CLIENT span per failover or resumed
 * attempt, and the hops as events.
 */
export interface RequestTrace {
  /** The routing decision's predicted cached tokens on the chosen replica. */
  routed(predictedCachedTokens: number): void;
  /**
   * An upstream attempt begins; the headers that carry its context to the replica are returned,
   * flat [name, value, ...]. The first attempt's context is the SERVER span's; a failover or a
   * resume starts a CLIENT span of its own (the previous one, still open, ends).
   */
  attempt(target: AttemptTarget): string[];
  /** The open attempt failed: a CLIENT span ends now with the cause; the first attempt's failure is an event. */
  attemptFailed(cause: string): void;
  /** The request waited for its adapter's load on `replica` (an event at the load's end, performance.now() `at`). */
  adapterLoaded(replica: string, adapter: string, outcome: string, ms: number, at: number): void;
  /** The exchange was recorded: the hop events from its clock, the attributes, every span ended. */
  end(clock: HopClock, facts: TraceFacts): void;
  /** Its SERVER span's context (for another span's link); null when not sampled. */
  context(): SpanContext | null;
}

/** A caller turn's first call, for the links of the turn's later calls. */
export interface TurnLinks {
  first(key: string): SpanContext | undefined;
  remember(key: string, ctx: SpanContext): void;
}

const propagator = new W3CTraceContextPropagator();
const headerGetter = {
  keys: (h: IncomingHttpHeaders) => Object.keys(h),
  get: (h: IncomingHttpHeaders, k: string) => h[k],
};
const headerSetter = { set: (out: string[], k: string, v: string) => { out.push(k, v); } };

/** The headers that carry `span`'s context to a replica (traceparent, and tracestate when there is one). */
function contextHeaders(span: Span): string[] {
  const out: string[] = [];
  propagator.inject(trace.setSpan(ROOT_CONTEXT, span), out, headerSetter);
  return out;
}

/** Span times: the hop clock's marks (performance.now()) on the epoch, so spans and histograms share one reading. */
const epochMs = (mark: number) => performance.timeOrigin + mark;

interface Address { readonly host: string; readonly port: number | undefined }

/** Replica origins already parsed: a fleet has a handful, so this stays small; cleared past the bound all the same. */
const addresses = new Map<string, Address>();
const ADDRESSES_KEPT = 1024;

function addressOf(origin: string): Address {
  let a = addresses.get(origin);
  if (a !== undefined) return a;
  const m = /:(\d+)$/.exec(origin);
  const port = m ? Number(m[1]) : origin.startsWith('https:') ? 443 : origin.startsWith('http:') ? 80 : undefined;
  a = { host: origin.replace(/^[a-z]+:\/\//, '').replace(/:\d+$/, '').replace(/^\[(.*)\]$/, '$1'), port };
  if (addresses.size >= ADDRESSES_KEPT) addresses.clear();
  addresses.set(origin, a);
  return a;
}

/** The exchange's trace when its SERVER span is sampled. */
class SampledTrace implements RequestTrace {
  /** The first attempt's replica: the SERVER span's context went to it. */
  private first: AttemptTarget | null = null;
  private firstFailed = false;
  /** The CLIENT span of the failover or resumed attempt in flight. */
  private open: Span | null = null;
  private openTarget: AttemptTarget | null = null;
  private predicted: number | null = null;

  constructor(
    private readonly tracer: Tracer,
    private readonly links: TurnLinks,
    private readonly server: Span,
    private readonly parent: Context,
    private readonly method: string,
  ) {}

  routed(n: number): void { this.predicted = n; }

  adapterLoaded(replica: string, adapter: string, outcome: string, ms: number, at: number): void {
    this.server.addEvent(EVENT.adapterLoad, { [A.replica]: replica, [A.adapter]: adapter, [A.adapterOutcome]: outcome, [A.adapterLoadMs]: ms }, epochMs(at));
  }
  context(): SpanContext { return this.server.spanContext(); }

  attempt(t: AttemptTarget): string[] {
    if (t.index === 0 && !t.resume) {
      this.first = t;
      return contextHeaders(this.server);
    }
    this.endOpen(undefined, null, null);
    // Attributes are set when the span ends, in one pass, not at its start (the SDK copies a start's twice).
    this.open = this.tracer.startSpan(t.resume ? 'resume' : 'attempt', { kind: SpanKind.CLIENT }, trace.setSpan(this.parent, this.server));
    this.openTarget = t;
    return contextHeaders(this.open);
  }

  attemptFailed(cause: string): void {
    if (this.open !== null) return this.endOpen(undefined, cause, null);
    if (this.first === null || this.firstFailed) return;
    this.firstFailed = true;
    this.server.addEvent(EVENT.attemptFailed, { [A.replica]: this.first.replica, [A.errorType]: cause });
  }

  /** Ends the open CLIENT span: `failure` is an attempt's cause, `outcome` the exchange's when it ended the exchange. */
  private endOpen(endTime: number | undefined, failure: string | null, f: TraceFacts | null): void {
    const span = this.open;
    const t = this.openTarget;
    if (span === null || t === null) return;
    const addr = addressOf(t.origin);
    const attrs: Attributes = {
      [A.replica]: t.replica, [A.serverAddress]: addr.host, [A.attempt]: t.index,
      [A.attemptKind]: t.resume ? 'resume' : t.reload ? 'adapter_reload' : 'failover',
    };
    if (addr.port !== undefined) attrs[A.serverPort] = addr.port;
    // As the HTTP conventions have it for a client: a 4xx or 5xx answer is this span's error too.
    const error = failure ?? (f === null ? null : f.outcome !== 'complete' ? f.outcome : f.status >= 400 ? String(f.status) : null);
    if (error !== null) attrs[A.errorType] = error;
    if (f !== null && f.status > 0) attrs[A.httpStatus] = f.status;
    span.setAttributes(attrs);
    if (error !== null) span.setStatus({ code: SpanStatusCode.ERROR, message: error });
    span.end(endTime);
    this.open = null;
    this.openTarget = null;
  }

  end(clock: HopClock, f: TraceFacts): void {
    const server = this.server;
    const endTime = epochMs(clock.ended);
    this.endOpen(endTime, null, f);
    // One event per hop, at the mark it begins with, carrying its duration: child spans would
    // draw bars, but each would be a span of its own to sample, queue and encode, and the hops
    // already tile the SERVER span end to end.
    const hops = hopsOf(clock);
    const marks = [clock.received, clock.parsed, clock.routed, clock.admitted, clock.sent, clock.upstreamHeaders, clock.firstToken];
    for (let i = 0; i < HOPS.length; i++) {
      const d = hops[HOPS[i]];
      if (d !== null) server.addEvent(HOPS[i], { [A.hopMs]: d }, epochMs(marks[i]));
    }
    const op = f.kind === null ? undefined : OPERATION_OF[f.kind];
    server.updateName(f.reason !== null ? `${f.method} ${f.path}` : f.method);
    const attrs: Attributes = {
      [A.httpMethod]: this.method, [A.httpStatus]: f.status, [A.outcome]: f.outcome, [A.attempts]: f.attempts,
    };
    // The route table's path: low-cardinality, so http.route (an unrouted request's path is the client's text).
    if (f.reason !== null) { attrs[A.httpRoute] = f.path; attrs[A.routeReason] = f.reason; }
    if (op !== undefined) attrs[A.operation] = op;
    if (f.model !== null) {
      attrs[A.requestModel] = f.requestedModel ?? f.model;
      // A replica is chosen among those serving the model by that name, and answers under it.
      if (f.status >= 200 && f.status < 300) attrs[A.responseModel] = f.model;
      if (f.requestedModel != null) attrs[A.adapterVersion] = f.model;
    }
    if (f.replica !== null) attrs[A.replica] = f.replica;
    // The first attempt's replica answered (no failover, no resume): its address, as the attempt spans have it.
    if (this.first !== null && !this.firstFailed && f.attempts === 1) {
      const addr = addressOf(this.first.origin);
      attrs[A.replicaAddress] = addr.host;
      if (addr.port !== undefined) attrs[A.replicaPort] = addr.port;
    }
    if (this.predicted !== null) attrs[A.predictedCached] = this.predicted;
    if (f.promptTokens !== null) attrs[A.inputTokens] = f.promptTokens;
    if (f.completionTokens !== null) attrs[A.outputTokens] = f.completionTokens;
    // Served cached tokens are gen_ai.usage.cache_read.input_tokens, beside warmroute.cached_tokens.predicted.
    if (f.cachedTokens !== null) attrs[A.cacheReadTokens] = f.cachedTokens;
    if (hops.queue !== null) attrs[A.queueWaitMs] = hops.queue;
    const ttft = ttftOf(clock);
    if (ttft !== null) attrs[A.timeToFirstChunk] = ttft / 1000;
    const overhead = f.replica !== null ? overheadOf(clock) : null;
    if (overhead !== null) attrs[A.overheadMs] = overhead;
    if (f.session !== null) attrs[A.session] = f.session;
    if (f.turn !== null) attrs[A.turn] = f.turn;
    if (f.call !== null) attrs[A.turnCall] = f.call;
    if (f.toolCallTruncated) attrs[A.toolCallsTruncated] = true;
    if (f.errorCode !== null) attrs[A.errorType] = f.errorCode;
    else if (f.outcome !== 'complete') attrs[A.errorType] = f.outcome;
    server.setAttributes(attrs);
    // As the HTTP conventions have it for a server: a 4xx is the client's error, not this span's.
    if (f.status >= 500 || f.outcome === 'interrupted') server.setStatus({ code: SpanStatusCode.ERROR, message: f.errorCode ?? f.outcome });
    if (f.turnKey !== null && f.turn !== null && f.call !== null) {
      const key = `${f.turnKey}#${f.turn}`;
      if (f.call === 0) this.links.remember(key, server.spanContext());
      else {
        const first = this.links.first(key);
        if (first !== undefined) server.addLink({ context: first, attributes: { [A.link]: 'turn_first_call' } });
      }
    }
    if (f.voice) {
      server.setAttribute(A.voiceTurnGapMs, f.voice.gapMs);
      if (f.voice.link !== null) server.addLink({ context: f.voice.link, attributes: { [A.link]: 'voice_turn_speech_end' } });
    }
    server.end(endTime);
  }
}

/**
 * The exchange's trace when its SERVER span is not sampled (the sampler's choice, or the caller's
 * unsampled traceparent): nothing is recorded, and every attempt sends the same unsampled context
 * on, made once.
 */
class UnsampledTrace implements RequestTrace {
  private headers: string[] | null = null;
  constructor(private readonly server: Span) {}
  routed(): void {}
  attempt(): string[] { return this.headers ??= contextHeaders(this.server); }
  attemptFailed(): void {}
  adapterLoaded(): void {}
  end(): void {}
  context(): null { return null; }
}

export function beginRequestTrace(tracer: Tracer, links: TurnLinks, headers: IncomingHttpHeaders, method: string, received: number): RequestTrace {
  const parent = headers.traceparent === undefined ? ROOT_CONTEXT : propagator.extract(ROOT_CONTEXT, headers, headerGetter);
  // No attributes at the start: none of the samplers offered reads them, and the end sets them all in one pass.
  const server = tracer.startSpan(method, { kind: SpanKind.SERVER, startTime: epochMs(received) }, parent);
  return server.isRecording() ? new SampledTrace(tracer, links, server, parent, method) : new UnsampledTrace(server);
}
