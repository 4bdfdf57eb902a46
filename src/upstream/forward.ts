import type { IncomingMessage } from 'node:http';
import type { Dispatcher } from 'undici';
import type { ResolvedConfig } from '../config/schema.js';
import { errors, isWarmrouteError, toWarmrouteError, writeError, type WarmrouteError } from '../errors.js';
import type { Health } from '../fleet/health.js';
import type { ReplicaState } from '../fleet/registry.js';
import type { RequestIdentity } from '../identify/identity.js';
import type { Admission } from '../queue/admission.js';
import { Shed, type QueuePlace } from '../queue/limiter.js';
import type { Decision, RouteReason } from '../routing/types.js';
import { endInterrupted } from '../stream/interrupt.js';
import { continuationBody, createResumeLog, createSplice, type ResumeLog } from '../stream/resume.js';
import { createTap, type FirstToken, type Tap, type Usage } from '../stream/tap.js';
import type { ToolCallEnd, ToolWatchMode } from '../stream/tool-calls.js';
import { nowMs, serverTiming, type HopClock } from '../telemetry/hop-clock.js';
import type { Metrics } from '../telemetry/metrics.js';
import type { ExchangeOwner } from './exchange.js';
import { ClientGone, failureOf, RetryStatus } from './failures.js';
import { clientResponseHeaders, upstreamRequestHeaders } from './headers.js';

export interface ForwardDeps {
  readonly agent: Dispatcher;
  readonly admission: Admission;
  readonly health: Health;
  readonly metrics: Metrics;
  readonly config: ResolvedConfig;
  byName(name: string): ReplicaState | undefined;
}

/** One client request on its way through the gateway. */
export interface ForwardRequest {
  readonly req: IncomingMessage;
  /** Holds every slot the exchange takes and ends it (upstream/exchange.ts). */
  readonly owner: ExchangeOwner<Outcome>;
  readonly method: string;
  /** Origin-form target as checked by the edge (normalised path and the query). */
  readonly target: string;
  readonly body: Buffer | null;
  readonly identity: RequestIdentity;
  readonly decision: Decision;
  readonly clock: HopClock;
  readonly draining: () => boolean;
  /** The client's Authorization is the gateway's own API key: it is not passed on. */
  readonly stripAuthorization: boolean;
  /** The parsed chat body, when resume.enabled and the request can be resumed mid-stream. */
  readonly resumable?: Record<string, unknown>;
  /**
   * The replica answers as it generates (`stream: true`, or no generation at all). A non-streamed
   * generation's headers come only when it is done: timeouts.unstreamedHeadersMs bounds them, and
   * running past it says nothing of the replica's health.
   */
  readonly streamed: boolean;
  /** The tool-call guard's word on the request (edge/tool-guard.ts): answers checked, and what was raised. */
  readonly tools?: { readonly watch: ToolWatchMode | null; readonly adjusted: string | null } | null;
  /** Its place in the replicas' queues: class and deadline (queue/priority.ts). */
  readonly place?: QueuePlace | null;
}

/** How an exchange ended, for the access line, the metrics and the router. */
export type Ending =
  /** The replica's response reached the client whole (whatever its status). */
  | 'complete'
  /** No replica answered: the client got the gateway's own error. */
  | 'failed'
  /** The replica failed after its first byte: the client got an error event or a cut-off body. */
  | 'interrupted'
  /** The client went away first. */
  | 'aborted'
  /** The client stopped reading for timeouts.clientStallMs: it was disconnected and the upstream request aborted. */
  | 'stalled';

export interface Outcome {
  ending: Ending;
  /** Status sent to the client (0 when it went away before any). */
  status: number;
  replica: string | null;
  reason: RouteReason;
  attempts: number;
  usage: Usage | null;
  sse: boolean;
  done: boolean;
  error: WarmrouteError | null;
  /** What the last failed attempt's error said (undici's message): for the log, never the client. */
  upstreamError: string | null;
  /** The stream broke off and was continued on another replica (resume.enabled). */
  resumed: boolean;
  /** Responses API: the id of the response relayed, as the tap read it. */
  responseId: string | null;
  /** What the first token of a stream was (content, reasoning, a tool call); null when none or not streamed. */
  firstToken: FirstToken | null;
  /** A request offering tools: whether its answer ended with a tool call cut on its length. */
  toolCall: ToolCallEnd | null;
  /** What the tool-call guard raised (`max_tokens=256`), null when nothing. */
  adjusted: string | null;
}

/**
 * Sends the request to the ranked replicas in turn until one answers, then streams its response
 * to the client as received. A failure before any response byte moves on to the next replica
 * (at most limits.maxRetries times), counted by cause; after the first byte it never does (see
 * stream/interrupt.ts). Every slot it takes is held by `ex.owner`, and it ends the exchange
 * through it exactly once.
 */
export function forward(ex: ForwardRequest, deps: ForwardDeps): void {
  const { config, metrics } = deps;
  const { owner, clock, decision } = ex;
  const res = owner.res;
  const ranked = decision.ranked;
  const maxAttempts = Math.min(ranked.length, config.limits.maxRetries + 1);
  const stallMs = config.timeouts.clientStallMs;

  const out: Outcome = { ending: 'failed', status: 0, replica: null, reason: decision.reason, attempts: 0, usage: null, sse: false, done: false, error: null, upstreamError: null, resumed: false, responseId: null, firstToken: null, toolCall: null, adjusted: ex.tools?.adjusted ?? null };
  let replica: ReplicaState | null = null;
  let tap: Tap | null = null;
  let resumeLog: ResumeLog | null = null;
  let paused: Dispatcher.DispatchController | null = null;

  const routeHeaders = () => (!config.headers.route ? [] : replica ? ['x-warmroute-replica', replica.name, 'x-warmroute-route', out.reason] : ['x-warmroute-route', out.reason]);

  function finish(ending: Ending) {
    if (owner.ended) return;
    out.ending = ending;
    clock.ended = nowMs();
    if (tap) {
      tap.end();
      out.usage = tap.usage;
      out.done = tap.done;
      out.responseId = tap.responseId;
      out.firstToken = tap.firstToken;
      out.toolCall = tap.toolCall;
    }
    owner.end(out);
  }

  owner.onClientGone(() => finish('aborted'));

  function fail(err: WarmrouteError) {
    out.error = err;
    out.status = err.statusCode;
    writeError(res, err, routeHeaders());
    finish('failed');
  }

  function attempt(i: number): void {
    if (owner.ended) return;
    const r = deps.byName(ranked[i].name);
    if (r === undefined) {
      // Left the fleet (DNS, config reload) since the request was routed: the next one.
      if (i + 1 < maxAttempts) return attempt(i + 1);
      return fail(errors.noReplica());
    }
    replica = r;
    out.replica = r.name;
    out.attempts = i + 1;
    if (i > 0) out.reason = 'failover';
    let wait: Promise<void> | null;
    try {
      wait = deps.admission.acquire(r, ex.place ?? undefined);
    } catch (e) {
      return shed(e, i);
    }
    if (wait === null) {
      if (owner.holdReplica(r)) dispatch(r, i);
      return;
    }
    const w = wait;
    owner.waiting(() => deps.admission.cancel(r, w));
    w.then(
      () => { owner.waiting(null); if (owner.holdReplica(r)) dispatch(r, i); },
      (e: unknown) => { owner.waiting(null); if (!owner.ended) shed(e, i); },
    );
  }

  /**
   * The replica's own queue is full (the next replica is tried) or its wait ran out (503); or the
   * gateway is shutting down (its queues are closed: 503 shutting_down, not a shed).
   */
  function shed(e: unknown, i: number): void {
    if (!(e instanceof Shed)) return fail(toWarmrouteError(e));
    metrics.shed.inc({ reason: `replica_${e.cause}` });
    if (e.cause === 'queue_full' && i + 1 < maxAttempts) {
      metrics.retries.inc({ replica: ranked[i].name, cause: 'queue_full' });
      return attempt(i + 1);
    }
    fail(e.error);
  }

  /**
   * The client has read nothing for timeouts.clientStallMs while the replica waited on it: ended
   * (the recorder counts it and warns), the upstream request aborted by the owner, the client cut.
   */
  function stalled() {
    out.error = errors.clientStalled([stallMs]);
    finish('stalled');
    res.destroy();
  }
  const resumeRelay = () => {
    owner.stall(stallMs, null);
    const c = paused;
    paused = null;
    c?.resume();
  };

  /** Writes to the client, pausing the replica while the client's socket is full. */
  function relay(controller: Dispatcher.DispatchController, bytes: Buffer | string) {
    if (bytes.length > 0 && !res.write(bytes) && paused === null) {
      controller.pause();
      paused = controller;
      owner.stall(stallMs, stalled);
      res.once('drain', resumeRelay);
    }
  }

  function dispatch(r: ReplicaState, i: number) {
    if (clock.admitted === 0) clock.admitted = nowMs();
    clock.upstreamHeaders = 0;
    const isLast = i + 1 >= maxAttempts;
    let headersWritten = false;
    const markSent = () => { clock.sent = nowMs(); };
    const headersMs = ex.streamed ? config.timeouts.headersMs : config.timeouts.unstreamedHeadersMs;

    const handler: Dispatcher.DispatchHandler = {
      onRequestStart(controller) {
        if (owner.ended) return controller.abort(new ClientGone('client disconnected'));
        owner.upstream((e) => controller.abort(e));
        // undici writes the request right after this returns, in the same tick: the mark goes
        // after the write, so `connect` ends when the request is on a connected socket.
        queueMicrotask(markSent);
      },
      onResponseStart(controller, status, headers) {
        // An informational answer (100 Continue, 103 Early Hints) precedes the real one: skipped.
        if (status < 200) return;
        clock.upstreamHeaders = nowMs();
        deps.health.observe(r, status >= 500 ? '5xx' : 'ok', status >= 500 ? `answered ${status}` : undefined);
        if ((status === 502 || status === 503) && !isLast) {
          controller.abort(new RetryStatus(status));
          return;
        }
        const h = clientResponseHeaders(headers as Record<string, string | string[] | undefined>);
        out.sse = h.contentType.startsWith('text/event-stream');
        tap = createTap(out.sse, ex.identity.kind === 'responses', ex.tools?.watch ?? null);
        out.status = status;
        // An event stream goes out chunked whatever the replica framed it with: if the replica
        // fails mid-way, an error event can still be added (stream/interrupt.ts).
        if (h.contentLength !== null && !out.sse) h.headers.push('content-length', h.contentLength);
        h.headers.push(...routeHeaders());
        if (out.adjusted !== null) h.headers.push('x-warmroute-adjusted', out.adjusted);
        if (config.headers.serverTiming) h.headers.push('server-timing', serverTiming(clock));
        if (ex.draining()) h.headers.push('connection', 'close');
        res.writeHead(status, h.headers);
        headersWritten = true;
        if (ex.resumable && out.sse && status === 200) resumeLog = createResumeLog(config.resume.maxBytes);
      },
      onResponseData(controller, chunk) {
        if (tap === null) return;
        if (tap.scan(chunk)) clock.firstToken = nowMs();
        relay(controller, resumeLog === null ? chunk : resumeLog.accept(chunk));
      },
      onResponseEnd() {
        owner.upstream(null);
        if (tap === null) return;
        // The replica's last bytes, had it left its last event unterminated: held back till now.
        res.end(resumeLog?.rest());
        finish('complete');
      },
      onResponseError(_controller, err) {
        owner.upstream(null);
        if (err instanceof ClientGone || owner.ended) { finish('aborted'); return; }
        if (!headersWritten) return failedBeforeResponse(r, i, isLast, err, headersMs);
        failedMidStream(r, i, err);
      },
    };

    deps.agent.dispatch({
      origin: r.origin,
      path: ex.target,
      method: ex.method,
      headers: upstreamRequestHeaders(ex.req, r.apiKey, ex.stripAuthorization),
      body: ex.body,
      headersTimeout: headersMs,
      bodyTimeout: config.timeouts.idleMs,
    }, handler);
  }

  function failedBeforeResponse(r: ReplicaState, i: number, isLast: boolean, err: Error, headersMs: number) {
    const { cause, retry, down } = failureOf(err);
    out.upstreamError = err.message;
    if (down) deps.health.observe(r, 'connect', err.message);
    // A non-streamed generation that outlasts its bound is a long answer, not a sick replica.
    else if (cause === 'headers_timeout' && ex.streamed) deps.health.observe(r, 'timeout', err.message);
    owner.releaseReplica();
    if (retry && !isLast) {
      metrics.retries.inc({ replica: r.name, cause });
      return attempt(i + 1);
    }
    if (cause === 'headers_timeout') return fail(errors.upstreamTimeout([r.name, headersMs]));
    if (isWarmrouteError(err)) return fail(err);
    fail(errors.upstreamUnavailable([r.name, cause === 'other' ? 'the request could not be sent' : cause.replaceAll('_', ' ')]));
  }

  function failedMidStream(r: ReplicaState, i: number, err: Error) {
    const { cause } = failureOf(err);
    out.upstreamError = err.message;
    metrics.streamErrors.inc({ replica: r.name, cause });
    const e = errors.upstreamStream([r.name, cause === 'idle_timeout' ? `no data for ${config.timeouts.idleMs} ms` : cause === 'reset' ? 'connection lost' : cause.replaceAll('_', ' ')]);
    if (resumeLog !== null && !out.resumed) return resume(r, i, e);
    interrupted(e);
  }

  function interrupted(e: WarmrouteError) {
    out.error = e;
    endInterrupted(res, e, out.sse);
    finish('interrupted');
  }

  /**
   * resume.enabled: the stream broke off after its first byte. Once per request, the next-ranked
   * replica continues the partial answer, spliced into the same stream (stream/resume.ts).
   */
  function resume(_failed: ReplicaState, i: number, e: WarmrouteError) {
    const partial = resumeLog!.partial();
    resumeLog = null;
    owner.releaseReplica();
    // A stream that broke off while the client's socket was full: the continuation starts unpaused.
    owner.stall(stallMs, null);
    res.off('drain', resumeRelay);
    paused = null;
    const next = i + 1 < ranked.length ? deps.byName(ranked[i + 1].name) : undefined;
    const why = typeof partial === 'string' ? partial : next === undefined ? 'no_replica' : null;
    if (why !== null) {
      metrics.resumes.inc({ outcome: why });
      return interrupted(e);
    }
    const { id, text } = partial as { id: string; text: string };
    out.resumed = true;
    let wait: Promise<void> | null;
    try {
      wait = deps.admission.acquire(next!);
    } catch {
      metrics.resumes.inc({ outcome: 'failed' });
      return interrupted(e);
    }
    const go = () => { if (owner.holdReplica(next!)) continueOn(next!, continuationBody(ex.resumable!, text), id, e); };
    if (wait === null) return go();
    // Like any queue wait: a client that leaves meanwhile gives its place up at once.
    const w = wait;
    owner.waiting(() => deps.admission.cancel(next!, w));
    w.then(
      () => { owner.waiting(null); go(); },
      () => { owner.waiting(null); if (owner.ended) return; metrics.resumes.inc({ outcome: 'failed' }); interrupted(e); },
    );
  }

  function continueOn(r: ReplicaState, body: string, originalId: string, original: WarmrouteError) {
    replica = r;
    out.replica = r.name;
    out.attempts++;
    const splice = createSplice(originalId);
    let ok = false;
    const headers = upstreamRequestHeaders(ex.req, r.apiKey, ex.stripAuthorization);
    // A client may send JSON without a content type; the continuation's body is JSON the gateway wrote.
    if (ex.req.headers['content-type'] === undefined) headers.push('content-type', 'application/json');
    deps.agent.dispatch({
      origin: r.origin,
      path: ex.target,
      method: ex.method,
      headers,
      body,
      headersTimeout: config.timeouts.headersMs,
      bodyTimeout: config.timeouts.idleMs,
    }, {
      onRequestStart(controller) {
        if (owner.ended) return controller.abort(new ClientGone('client disconnected'));
        owner.upstream((err) => controller.abort(err));
      },
      onResponseStart(controller, status, headers) {
        if (status < 200) return;
        const type = String((headers as Record<string, unknown>)['content-type'] ?? '');
        if (status !== 200 || !type.startsWith('text/event-stream')) controller.abort(new Error(`the continuation was answered ${status}`));
        else ok = true;
      },
      onResponseData(controller, chunk) {
        if (!ok) return;
        const text = splice.rewrite(chunk);
        if (text.length === 0) return;
        const bytes = Buffer.from(text);
        tap!.scan(bytes);
        relay(controller, bytes);
      },
      onResponseEnd() {
        owner.upstream(null);
        if (!ok) return;
        metrics.resumes.inc({ outcome: 'resumed' });
        res.end();
        finish('complete');
      },
      onResponseError(_controller, err) {
        owner.upstream(null);
        if (err instanceof ClientGone || owner.ended) { finish('aborted'); return; }
        metrics.resumes.inc({ outcome: 'failed' });
        out.upstreamError = `${original.message}; the continuation on ${r.name} failed: ${ok ? 'mid-stream' : err.message}`;
        interrupted(original);
      },
    });
  }

  attempt(0);
}
