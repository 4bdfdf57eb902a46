import { errors, isWarmrouteError, toWarmrouteError, writeError, type WarmrouteError } from '../errors.js';
import type { ReplicaState } from '../fleet/registry.js';
import { prefillOf, Shed } from '../queue/limiter.js';
import { endInterrupted } from '../stream/interrupt.js';
import { continuationBody, createResumeLog, type ResumeLog } from '../stream/resume.js';
import type { Tap } from '../stream/tap.js';
import { nowMs } from '../telemetry/hop-clock.js';
import { AnswerAttempt, ContinuationAttempt, type Attempt, type AttemptHost, type AttemptResult } from './attempt.js';
import { AdapterGone, failureOf } from './failures.js';
import type { Ending, ForwardDeps, ForwardRequest, Outcome } from './forward-request.js';
import { ClientRelay } from './relay.js';

export type { Ending, ForwardDeps, ForwardRequest, Outcome } from './forward-request.js';

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
  /** A managed adapter gone from its replica was loaded there again: at most once per exchange. */
  private regained = false;

  constructor(readonly ex: ForwardRequest, readonly deps: ForwardDeps) {
    const { decision, owner } = ex;
    this.maxAttempts = Math.min(decision.ranked.length, deps.config.limits.maxRetries + 1);
    this.out = { ending: 'failed', status: 0, replica: null, reason: decision.reason, attempts: 0, usage: null, sse: false, done: false, error: null, upstreamError: null, resumed: false, responseId: null, firstToken: null, toolCall: null, adjusted: ex.tools?.adjusted ?? null };
    this.relay = new ClientRelay(owner.res, owner, deps.config.timeouts.clientStallMs, () => this.stalled());
    owner.onClientGone(() => this.finish('aborted'));
  }

  routeHeaders(): string[] {
    const h = this.replica ? ['x-warmroute-replica', this.replica.name, 'x-warmroute-route', this.out.reason] : ['x-warmroute-route', this.out.reason];
    if (this.ex.adapterVersion) h.push('x-warmroute-adapter-version', this.ex.adapterVersion);
    return h;
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
    const place = this.ex.place ?? undefined;
    const prefill = prefillOf(place, this.ex.streamed);
    let wait: Promise<void> | null;
    try {
      wait = admission.acquire(r, place, prefill);
    } catch (e) {
      return refused(e);
    }
    if (wait === null) {
      if (owner.holdReplica(r, prefill)) go();
      return;
    }
    // Like any queue wait: a client that leaves meanwhile gives its place up at once.
    const w = wait;
    owner.waiting(() => admission.cancel(r, w));
    w.then(
      () => { owner.waiting(null); if (owner.holdReplica(r, prefill)) go(); },
      (e: unknown) => { owner.waiting(null); if (!owner.ended) refused(e); },
    );
  }

  regains404(): boolean {
    return !this.regained && this.ex.managedAdapter != null && this.deps.adapters !== undefined;
  }

  attemptEnded(a: Attempt, result: AttemptResult): void {
    if (result.kind === 'failed') this.ex.trace?.attemptFailed(failureOf(result.err).cause);
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
      out.toolCall = tap.toolCall;
    }
    owner.end(out);
  }

  private fail(err: WarmrouteError): void {
    this.out.error = err;
    this.out.status = err.statusCode;
    writeError(this.ex.owner.res, err, this.deps.config.headers.route ? this.routeHeaders() : [], this.ex.api);
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
    if (err instanceof AdapterGone) return this.regain(a, err);
    if (retry && !a.isLast) {
      deps.metrics.retries.inc({ replica: r.name, cause });
      return this.next(a.index + 1);
    }
    const t = deps.config.timeouts;
    if (cause === 'headers_timeout') return this.fail(errors.upstreamTimeout([r.name, ex.streamed ? t.headersMs : t.unstreamedHeadersMs]));
    if (isWarmrouteError(err)) return this.fail(err);
    this.fail(errors.upstreamUnavailable([r.name, cause === 'other' ? 'the request could not be sent' : cause.replaceAll('_', ' ')]));
  }

  /**
   * The replica no longer has the managed adapter it was routed to as loaded (another gateway
   * unloaded it, or it restarted): loaded there again, then the request sent there again, counted
   * as a retry with cause adapter_gone. A load that fails is the usual 502 adapter_load_failed.
   */
  private regain(a: AnswerAttempt, gone: AdapterGone): void {
    const { ex, deps, out } = this;
    this.regained = true;
    const r = a.replica;
    deps.metrics.retries.inc({ replica: r.name, cause: 'adapter_gone' });
    deps.adapters!.regain(r, gone.adapter).then((change) => {
      if (change !== null) ex.trace?.adapterLoaded(change.replica, change.adapter, change.outcome, change.ms, nowMs());
      if (ex.owner.ended) return;
      this.admitted(r, () => {
        out.attempts++;
        new AnswerAttempt(this, r, a.index, a.isLast, true).dispatch();
      }, (e) => this.shed(e, a.index));
    }, (e: unknown) => {
      if (!ex.owner.ended) this.fail(toWarmrouteError(e));
    });
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
    endInterrupted(this.ex.owner.res, e, this.out.sse, this.ex.api);
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
