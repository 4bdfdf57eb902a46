import type { Dispatcher } from 'undici';
import type { IncomingHttpHeaders } from 'undici/types/header.js';
import type { ReplicaState } from '../fleet/registry.js';
import { createSplice } from '../stream/resume.js';
import { createTap } from '../stream/tap.js';
import { nowMs, serverTiming } from '../telemetry/hop-clock.js';
import { AdapterGone, ClientGone, RetryStatus } from './failures.js';
import type { ForwardDeps, ForwardRequest, Outcome } from './forward-request.js';
import { clientResponseHeaders, upstreamRequestHeaders } from './headers.js';
import type { ClientRelay } from './relay.js';
import type { Tap } from '../stream/tap.js';
import type { ResumeLog } from '../stream/resume.js';

/** How one attempt ended; what comes next (another attempt, or the exchange's end) is its host's call. */
export type AttemptResult =
  /** The replica's response reached the client whole. */
  | { readonly kind: 'complete' }
  /** The client went away (or the exchange ended) first. */
  | { readonly kind: 'aborted' }
  /** The replica failed: before its response's first byte reached the client, or after. */
  | { readonly kind: 'failed'; readonly err: Error; readonly afterFirstByte: boolean };

/** What an attempt shares with the exchange it is part of (upstream/forward.ts). */
export interface AttemptHost {
  readonly ex: ForwardRequest;
  readonly deps: ForwardDeps;
  readonly out: Outcome;
  readonly relay: ClientRelay;
  /** The client's response's tap: made by the attempt that answers, fed by its continuation too. */
  tap: Tap | null;
  /** resume.enabled: what a stream relayed so far said, should it break off. */
  resumeLog: ResumeLog | null;
  /** x-warmroute-replica and x-warmroute-route, as the client's response headers carry them. */
  routeHeaders(): string[];
  /** The answering attempt wrote the client's response headers (a resumable stream starts its log). */
  answered(status: number): void;
  /** Whether a 404 from a replica means its managed adapter is gone there, to be loaded again (once per exchange). */
  regains404(): boolean;
  /** Called once per attempt, when it is over. */
  attemptEnded(a: Attempt, result: AttemptResult): void;
}

/**
 * One request to one replica: built, dispatched through undici with itself as the handler, and
 * ended exactly once (`end`). Its subclasses say what the replica's answer means: the answer to
 * the client's request (`AnswerAttempt`), or the continuation of a stream that broke off
 * (`ContinuationAttempt`). Failover and resume make a new attempt; none is dispatched twice.
 */
export abstract class Attempt implements Dispatcher.DispatchHandler {
  /** nowMs() when it was dispatched. */
  startedAt = 0;
  private over = false;

  constructor(
    protected readonly host: AttemptHost,
    readonly replica: ReplicaState,
    /** Its replica's place in the ranked list. */
    readonly index: number,
  ) {}

  /** A continuation of a stream that broke off (its span is a `resume`, not a first try or a failover). */
  protected readonly resumes: boolean = false;
  /** Sent again to the same replica once its on-demand adapter was loaded there again (its span is an `adapter_reload`). */
  protected afterReload = false;

  /**
   * Headers bound for the replica: the client's end-to-end ones, the replica's key, x-forwarded-for;
   * with tracing on, this attempt's own traceparent (its CLIENT span begins here).
   */
  requestHeaders(): string[] {
    const { ex, out } = this.host;
    const trace = ex.trace?.attempt({ replica: this.replica.name, origin: this.replica.origin, index: out.attempts - 1, resume: this.resumes, reload: this.afterReload }) ?? null;
    return upstreamRequestHeaders(ex.req, this.replica.apiKey, ex.stripAuthorization, trace);
  }

  protected abstract body(): Buffer | string | null;
  protected abstract headersTimeoutMs(): number;

  /** Sends the request; the handler methods below take it from there. */
  dispatch(): void {
    const { ex, deps } = this.host;
    this.startedAt = nowMs();
    deps.agent.dispatch({
      origin: this.replica.origin,
      path: ex.target,
      method: ex.method,
      headers: this.requestHeaders(),
      body: this.body(),
      headersTimeout: this.headersTimeoutMs(),
      bodyTimeout: deps.config.timeouts.idleMs,
    }, this);
  }

  /** The attempt is over: reported to its host once; the owner holds no upstream request of it after this. */
  protected end(result: AttemptResult): void {
    if (this.over) return;
    this.over = true;
    this.host.ex.owner.upstream(null);
    this.host.attemptEnded(this, result);
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    const owner = this.host.ex.owner;
    if (owner.ended) return controller.abort(new ClientGone('client disconnected'));
    owner.upstream((e) => controller.abort(e));
  }

  abstract onResponseStart(controller: Dispatcher.DispatchController, status: number, headers: IncomingHttpHeaders): void;
  abstract onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void;
  abstract onResponseEnd(): void;

  onResponseError(_controller: Dispatcher.DispatchController, err: Error): void {
    if (err instanceof ClientGone || this.host.ex.owner.ended) return this.end({ kind: 'aborted' });
    this.end({ kind: 'failed', err, afterFirstByte: this.relayed() });
  }

  /** Whether any of this attempt's response reached the client. */
  protected abstract relayed(): boolean;
}

/** The client's request, sent to one replica; its response, relayed to the client as received. */
export class AnswerAttempt extends Attempt {
  private headersWritten = false;
  /** Whether a 502/503 would move the request on (another replica is left to try). */
  readonly isLast: boolean;

  constructor(host: AttemptHost, replica: ReplicaState, index: number, isLast: boolean, afterReload = false) {
    super(host, replica, index);
    this.isLast = isLast;
    this.afterReload = afterReload;
  }

  protected body(): Buffer | null { return this.host.ex.body; }

  protected headersTimeoutMs(): number {
    const t = this.host.deps.config.timeouts;
    return this.host.ex.streamed ? t.headersMs : t.unstreamedHeadersMs;
  }

  protected relayed(): boolean { return this.headersWritten; }

  override dispatch(): void {
    const clock = this.host.ex.clock;
    if (clock.admitted === 0) clock.admitted = nowMs();
    clock.upstreamHeaders = 0;
    super.dispatch();
  }

  private readonly markSent = () => { this.host.ex.clock.sent = nowMs(); };

  override onRequestStart(controller: Dispatcher.DispatchController): void {
    super.onRequestStart(controller);
    // undici writes the request right after this returns, in the same tick: the mark goes after
    // the write, so `connect` ends when the request is on a connected socket.
    if (!this.host.ex.owner.ended) queueMicrotask(this.markSent);
  }

  onResponseStart(controller: Dispatcher.DispatchController, status: number, headers: IncomingHttpHeaders): void {
    // An informational answer (100 Continue, 103 Early Hints) precedes the real one: skipped.
    if (status < 200) return;
    const { ex, deps, out } = this.host;
    const config = deps.config;
    ex.clock.upstreamHeaders = nowMs();
    if (status >= 500) deps.health.observe(this.replica, '5xx', `answered ${status}`);
    else deps.health.observe(this.replica, 'ok');
    if ((status === 502 || status === 503) && !this.isLast) {
      controller.abort(new RetryStatus(status));
      return;
    }
    if (status === 404 && this.host.regains404()) {
      controller.abort(new AdapterGone(this.replica.name, ex.managedAdapter!));
      return;
    }
    const h = clientResponseHeaders(headers as Record<string, string | string[] | undefined>);
    out.sse = h.contentType.startsWith('text/event-stream');
    const kind = ex.identity.kind;
    this.host.tap = createTap(out.sse, kind === 'responses' || kind === 'messages' ? kind : 'chat', ex.tools?.watch ?? null);
    out.status = status;
    // An event stream goes out chunked whatever the replica framed it with: if the replica
    // fails mid-way, an error event can still be added (stream/interrupt.ts).
    if (h.contentLength !== null && !out.sse) h.headers.push('content-length', h.contentLength);
    if (config.headers.route) h.headers.push(...this.host.routeHeaders());
    if (out.adjusted !== null) h.headers.push('x-warmroute-adjusted', out.adjusted);
    if (config.headers.serverTiming) h.headers.push('server-timing', serverTiming(ex.clock));
    if (ex.draining()) h.headers.push('connection', 'close');
    ex.owner.res.writeHead(status, h.headers);
    this.headersWritten = true;
    this.host.answered(status);
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    const { tap, resumeLog, ex } = this.host;
    if (tap === null || !this.headersWritten) return;
    if (tap.scan(chunk)) {
      ex.clock.firstToken = nowMs();
      ex.owner.prefilled();
    }
    this.host.relay.write(controller, resumeLog === null ? chunk : resumeLog.accept(chunk));
  }

  onResponseEnd(): void {
    if (!this.headersWritten) { this.host.ex.owner.upstream(null); return; }
    // The replica's last bytes, had it left its last event unterminated: held back till now.
    this.host.ex.owner.res.end(this.host.resumeLog?.rest());
    this.end({ kind: 'complete' });
  }
}

/**
 * resume.enabled: a stream that broke off, continued on the next replica from the partial answer
 * (stream/resume.ts). Its events are spliced into the client's stream under the original's id.
 */
export class ContinuationAttempt extends Attempt {
  private ok = false;
  private readonly splice: { rewrite(chunk: Buffer): string };

  constructor(host: AttemptHost, replica: ReplicaState, index: number, private readonly continuation: string, originalId: string) {
    super(host, replica, index);
    this.splice = createSplice(originalId);
  }

  protected override readonly resumes = true;
  protected body(): string { return this.continuation; }
  protected headersTimeoutMs(): number { return this.host.deps.config.timeouts.headersMs; }
  /** A continuation's own answer was never the client's first byte: "after" means it had begun. */
  protected relayed(): boolean { return this.ok; }

  override requestHeaders(): string[] {
    const headers = super.requestHeaders();
    // A client may send JSON without a content type; the continuation's body is JSON the gateway wrote.
    if (this.host.ex.req.headers['content-type'] === undefined) headers.push('content-type', 'application/json');
    return headers;
  }

  onResponseStart(controller: Dispatcher.DispatchController, status: number, headers: IncomingHttpHeaders): void {
    if (status < 200) return;
    const type = String((headers as Record<string, unknown>)['content-type'] ?? '');
    if (status !== 200 || !type.startsWith('text/event-stream')) controller.abort(new Error(`the continuation was answered ${status}`));
    else this.ok = true;
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (!this.ok) return;
    const text = this.splice.rewrite(chunk);
    if (text.length === 0) return;
    const bytes = Buffer.from(text);
    this.host.tap!.scan(bytes);
    // The stream's first token came before the break: the continuation's prefill is over once it
    // streams (a no-op after the first time).
    this.host.ex.owner.prefilled();
    this.host.relay.write(controller, bytes);
  }

  onResponseEnd(): void {
    if (!this.ok) { this.host.ex.owner.upstream(null); return; }
    this.host.ex.owner.res.end();
    this.end({ kind: 'complete' });
  }
}
