import type { IncomingMessage } from 'node:http';
import type { Dispatcher } from 'undici';
import type { ResolvedConfig } from '../config/schema.js';
import { errors, isWarmrouteError, toWarmrouteError, writeError, type WarmrouteError } from '../errors.js';
import type { Health } from '../fleet/health.js';
import type { ReplicaState } from '../fleet/registry.js';
import type { RequestIdentity } from '../identify/identity.js';
import type { Admission } from '../queue/admission.js';
import { Shed } from '../queue/limiter.js';
import type { Decision, RouteReason } from '../routing/types.js';
import { endInterrupted } from '../stream/interrupt.js';
import { continuationBody, createResumeLog, type ResumeLog } from '../stream/resume.js';
import type { FirstToken, Tap, Usage } from '../stream/tap.js';
import { nowMs, type HopClock } from '../telemetry/hop-clock.js';
import type { Metrics } from '../telemetry/metrics.js';
import { AnswerAttempt, ContinuationAttempt, type Attempt, type AttemptHost, type AttemptResult } from './attempt.js';
import type { ExchangeOwner } from './exchange.js';
import { failureOf } from './failures.js';
import { ClientRelay } from './relay.js';

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
}

/**
 * Sends the request to the ranked replicas in turn until one answers, then streams its response
 * to the client as received. Each try is one attempt (upstream/attempt.ts) that owns its dispatch,
 * its handler and its ending; this object decides what follows each ending. A failure before any
 * response byte moves on to the next replica (at most limits.maxRetries times), counted by cause;
 * after the first byte it never does (see stream/interrupt.ts), except to continue the stream
 * on the next replica when resume.enabled. Every slot it takes is held by `ex.owner`, and it ends
 * the exchange through it exactly once.
 */
export function forward(ex: ForwardRequest, deps: ForwardDeps): void {
  new Forwarding(ex, deps).next(0);
}

class Forwarding implements AttemptHost {
  readonly out: Outcome;
  readonly relay: ClientRelay;
  tap: Tap | null = null;
  resumeLog: ResumeLog | null = null;
  /** The replica tried last. */
  private replica: ReplicaState | null = null;
  /** A stream that broke off and is being continued: the error the client gets should the continuation fail too. */
  private broken: WarmrouteError | null = null;
  private readonly maxAttempts: number;

  constructor(readonly ex: ForwardRequest, readonly deps: ForwardDeps) {
    const { decision, owner } = ex;
    this.maxAttempts = Math.min(decision.ranked.length, deps.config.limits.maxRetries + 1);
    this.out = { ending: 'failed', status: 0, replica: null, reason: decision.reason, attempts: 0, usage: null, sse: false, done: false, error: null, upstreamError: null, resumed: false, responseId: null, firstToken: null };
    this.relay = new ClientRelay(owner.res, owner, deps.config.timeouts.clientStallMs, () => this.stalled());
    owner.onClientGone(() => this.finish('aborted'));
  }

  routeHeaders(): string[] {
    return this.replica ? ['x-warmroute-replica', this.replica.name, 'x-warmroute-route', this.out.reason] : ['x-warmroute-route', this.out.reason];
  }

  /** The attempt on the i-th ranked replica: admitted (at once, after a wait, or shed), then dispatched. */
  next(i: number): void {
    const { ex, deps, out } = this;
    const owner = ex.owner;
    if (owner.ended) return;
    const r = deps.byName(ex.decision.ranked[i].name);
    if (r === undefined) {
      // Left the fleet (DNS, config reload) since the request was routed: the next one.
      if (i + 1 < this.maxAttempts) return this.next(i + 1);
      return this.fail(errors.noReplica());
    }
    this.replica = r;
    out.replica = r.name;
    out.attempts = i + 1;
    if (i > 0) out.reason = 'failover';
    const attempt = new AnswerAttempt(this, r, i, i + 1 >= this.maxAttempts);
    this.admitted(r, () => attempt.dispatch(), (e) => this.shed(e, i));
  }

  /** The replica's admission slot: held by the owner once granted, then `go`; `refused` when its queue says no. */
  private admitted(r: ReplicaState, go: () => void, refused: (e: unknown) => void): void {
    const { owner } = this.ex;
    const admission = this.deps.admission;
    let wait: Promise<void> | null;
    try {
      wait = admission.acquire(r);
    } catch (e) {
      return refused(e);
    }
    if (wait === null) {
      if (owner.holdReplica(r)) go();
      return;
    }
    // Like any queue wait: a client that leaves meanwhile gives its place up at once.
    const w = wait;
    owner.waiting(() => admission.cancel(r, w));
    w.then(
      () => { owner.waiting(null); if (owner.holdReplica(r)) go(); },
      (e: unknown) => { owner.waiting(null); if (!owner.ended) refused(e); },
    );
  }

  attemptEnded(a: Attempt, result: AttemptResult): void {
    if (a instanceof ContinuationAttempt) return this.continuationEnded(a, result);
    if (result.kind === 'complete') return this.finish('complete');
    if (result.kind === 'aborted') return this.finish('aborted');
    if (!result.afterFirstByte) return this.failedBeforeResponse(a as AnswerAttempt, result.err);
    this.failedMidStream(a, result.err);
  }

  private finish(ending: Ending): void {
    const { owner, clock } = this.ex;
    if (owner.ended) return;
    const out = this.out;
    out.ending = ending;
    clock.ended = nowMs();
    const tap = this.tap;
    if (tap) {
      tap.end();
      out.usage = tap.usage;
      out.done = tap.done;
      out.responseId = tap.responseId;
      out.firstToken = tap.firstToken;
    }
    owner.end(out);
  }

  private fail(err: WarmrouteError): void {
    this.out.error = err;
    this.out.status = err.statusCode;
    writeError(this.ex.owner.res, err, this.deps.config.headers.route ? this.routeHeaders() : []);
    this.finish('failed');
  }

  /**
   * The replica's own queue is full (the next replica is tried) or its wait ran out (503); or the
   * gateway is shutting down (its queues are closed: 503 shutting_down, not a shed).
   */
  private shed(e: unknown, i: number): void {
    if (!(e instanceof Shed)) return this.fail(toWarmrouteError(e));
    const metrics = this.deps.metrics;
    metrics.shed.inc({ reason: `replica_${e.cause}` });
    if (e.cause === 'queue_full' && i + 1 < this.maxAttempts) {
      metrics.retries.inc({ replica: this.ex.decision.ranked[i].name, cause: 'queue_full' });
      return this.next(i + 1);
    }
    this.fail(e.error);
  }

  /**
   * The client has read nothing for timeouts.clientStallMs while the replica waited on it: ended
   * (the recorder counts it and warns), the upstream request aborted by the owner, the client cut.
   */
  private stalled(): void {
    this.out.error = errors.clientStalled([this.deps.config.timeouts.clientStallMs]);
    this.finish('stalled');
    this.ex.owner.res.destroy();
  }

  private failedBeforeResponse(a: AnswerAttempt, err: Error): void {
    const { ex, deps, out } = this;
    const r = a.replica;
    const { cause, retry, down } = failureOf(err);
    out.upstreamError = err.message;
    if (down) deps.health.observe(r, 'connect', err.message);
    // A non-streamed generation that outlasts its bound is a long answer, not a sick replica.
    else if (cause === 'headers_timeout' && ex.streamed) deps.health.observe(r, 'timeout', err.message);
    ex.owner.releaseReplica();
    if (retry && !a.isLast) {
      deps.metrics.retries.inc({ replica: r.name, cause });
      return this.next(a.index + 1);
    }
    const t = deps.config.timeouts;
    if (cause === 'headers_timeout') return this.fail(errors.upstreamTimeout([r.name, ex.streamed ? t.headersMs : t.unstreamedHeadersMs]));
    if (isWarmrouteError(err)) return this.fail(err);
    this.fail(errors.upstreamUnavailable([r.name, cause === 'other' ? 'the request could not be sent' : cause.replaceAll('_', ' ')]));
  }

  private failedMidStream(a: Attempt, err: Error): void {
    const { deps, out } = this;
    const r = a.replica;
    const { cause } = failureOf(err);
    out.upstreamError = err.message;
    deps.metrics.streamErrors.inc({ replica: r.name, cause });
    const e = errors.upstreamStream([r.name, cause === 'idle_timeout' ? `no data for ${deps.config.timeouts.idleMs} ms` : cause === 'reset' ? 'connection lost' : cause.replaceAll('_', ' ')]);
    if (this.resumeLog !== null && !out.resumed) return this.resume(a, e);
    this.interrupted(e);
  }

  private interrupted(e: WarmrouteError): void {
    this.out.error = e;
    endInterrupted(this.ex.owner.res, e, this.out.sse);
    this.finish('interrupted');
  }

  /**
   * resume.enabled: the stream broke off after its first byte. Once per request, the next-ranked
   * replica continues the partial answer, spliced into the same stream (stream/resume.ts).
   */
  private resume(failed: Attempt, e: WarmrouteError): void {
    const { ex, deps, out } = this;
    const metrics = deps.metrics;
    const partial = this.resumeLog!.partial();
    this.resumeLog = null;
    ex.owner.releaseReplica();
    // A stream that broke off while the client's socket was full: the continuation starts unpaused.
    this.relay.detach();
    const i = failed.index + 1;
    const ranked = ex.decision.ranked;
    const next = i < ranked.length ? deps.byName(ranked[i].name) : undefined;
    const why = typeof partial === 'string' ? partial : next === undefined ? 'no_replica' : null;
    if (why !== null) {
      metrics.resumes.inc({ outcome: why });
      return this.interrupted(e);
    }
    const { id, text } = partial as { id: string; text: string };
    const r = next!;
    out.resumed = true;
    this.broken = e;
    this.admitted(r, () => {
      this.replica = r;
      out.replica = r.name;
      out.attempts++;
      new ContinuationAttempt(this, r, i, continuationBody(ex.resumable!, text), id).dispatch();
    }, () => {
      metrics.resumes.inc({ outcome: 'failed' });
      this.interrupted(e);
    });
  }

  private continuationEnded(a: ContinuationAttempt, result: AttemptResult): void {
    const metrics = this.deps.metrics;
    if (result.kind === 'aborted') return this.finish('aborted');
    if (result.kind === 'complete') {
      metrics.resumes.inc({ outcome: 'resumed' });
      return this.finish('complete');
    }
    const original = this.broken!;
    metrics.resumes.inc({ outcome: 'failed' });
    this.out.upstreamError = `${original.message}; the continuation on ${a.replica.name} failed: ${result.afterFirstByte ? 'mid-stream' : result.err.message}`;
    this.interrupted(original);
  }

  /** The answering attempt wrote its headers: a resumable stream starts its log. */
  answered(status: number): void {
    if (this.ex.resumable && this.out.sse && status === 200) this.resumeLog = createResumeLog(this.deps.config.resume.maxBytes);
  }
}
