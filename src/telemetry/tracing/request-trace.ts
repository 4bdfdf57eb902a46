import type { IncomingHttpHeaders } from 'node:http';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Span, type SpanContext, type Tracer } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { hopsOf, overheadOf, ttftOf, type HopClock } from '../hop-clock.js';
import { HOPS } from '../metrics.js';
import { A, OPERATION_OF } from './attributes.js';

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
}

export interface AttemptTarget {
  readonly replica: string;
  /** The replica's origin (scheme://host:port). */
  readonly origin: string;
  /** Its index among the exchange's attempts, from 0. */
  readonly index: number;
  /** A continuation of a stream that broke off (resume.enabled). */
  readonly resume: boolean;
}

/** One exchange's spans: its SERVER span, a CLIENT span per upstream attempt, its hops. */
export interface RequestTrace {
  /** The routing decision's predicted cached tokens on the chosen replica. */
  routed(predictedCachedTokens: number): void;
  /**
   * An upstream attempt begins: its CLIENT span is started (the previous one, still open, ends)
   * and the headers that carry its context to the replica are returned, flat [name, value, ...].
   */
  attempt(target: AttemptTarget): string[];
  /** The open attempt failed: its span ends now, with the cause. */
  attemptFailed(cause: string): void;
  /** The exchange was recorded: the hop spans from its clock, the attributes, every span ended. */
  end(clock: HopClock, facts: TraceFacts): void;
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

/** Span times: the hop clock's marks (performance.now()) on the epoch, so spans and histograms share one reading. */
const epochMs = (mark: number) => performance.timeOrigin + mark;

function portOf(origin: string): number | undefined {
  const m = /:(\d+)$/.exec(origin);
  return m ? Number(m[1]) : origin.startsWith('https:') ? 443 : origin.startsWith('http:') ? 80 : undefined;
}
const hostOf = (origin: string) => origin.replace(/^[a-z]+:\/\//, '').replace(/:\d+$/, '').replace(/^\[(.*)\]$/, '$1');

export function beginRequestTrace(tracer: Tracer, links: TurnLinks, headers: IncomingHttpHeaders, method: string, received: number): RequestTrace {
  const parent = headers.traceparent === undefined ? ROOT_CONTEXT : propagator.extract(ROOT_CONTEXT, headers, headerGetter);
  const server = tracer.startSpan(method, { kind: SpanKind.SERVER, startTime: epochMs(received), attributes: { [A.httpMethod]: method } }, parent);
  const serverCtx = trace.setSpan(parent, server);
  const recording = server.isRecording();
  let open: Span | null = null;
  let predicted: number | null = null;

  return {
    routed(n) { predicted = n; },
    attempt(t) {
      open?.end();
      const attrs: Attributes = {
        [A.replica]: t.replica, [A.serverAddress]: hostOf(t.origin), [A.attempt]: t.index,
        [A.attemptKind]: t.resume ? 'resume' : t.index === 0 ? 'first' : 'failover',
      };
      const port = portOf(t.origin);
      if (port !== undefined) attrs[A.serverPort] = port;
      open = tracer.startSpan(t.resume ? 'resume' : 'attempt', { kind: SpanKind.CLIENT, attributes: attrs }, serverCtx);
      const out: string[] = [];
      propagator.inject(trace.setSpan(ROOT_CONTEXT, open), out, headerSetter);
      return out;
    },
    attemptFailed(cause) {
      if (open === null) return;
      open.setAttribute(A.errorType, cause);
      open.setStatus({ code: SpanStatusCode.ERROR, message: cause });
      open.end();
      open = null;
    },
    end(clock, f) {
      const endTime = epochMs(clock.ended);
      if (open !== null) {
        if (f.status > 0) open.setAttribute(A.httpStatus, f.status);
        if (f.outcome !== 'complete') open.setStatus({ code: SpanStatusCode.ERROR, message: f.outcome });
        open.end(endTime);
        open = null;
      }
      if (!recording) return server.end(endTime);
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
        [A.httpStatus]: f.status, [A.outcome]: f.outcome, [A.attempts]: f.attempts,
      };
      // The route table's path: low-cardinality, so http.route (an unrouted request's path is the client's text).
      if (f.reason !== null) { attrs[A.httpRoute] = f.path; attrs[A.routeReason] = f.reason; }
      if (op !== undefined) attrs[A.operation] = op;
      if (f.model !== null) {
        attrs[A.requestModel] = f.model;
        // A replica is chosen among those serving the model by that name, and answers under it.
        if (f.status >= 200 && f.status < 300) attrs[A.responseModel] = f.model;
      }
      if (f.replica !== null) attrs[A.replica] = f.replica;
      if (predicted !== null) attrs[A.predictedCached] = predicted;
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
        if (f.call === 0) links.remember(key, server.spanContext());
        else {
          const first = links.first(key);
          if (first !== undefined) server.addLink({ context: first, attributes: { 'warmroute.link': 'turn_first_call' } });
        }
      }
      server.end(endTime);
    },
  };
}
