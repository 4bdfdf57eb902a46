import type { Socket } from 'node:net';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ResolvedConfig } from '../config/schema.js';
import { errorBody, errors, isWarmrouteError, writeError, type WarmrouteError } from '../errors.js';
import type { Health } from '../fleet/health.js';
import type { ReplicaState } from '../fleet/registry.js';
import type { Decision, RequestIdentity, RouteReason, Router } from '../routing/types.js';
import { nowMs, serverTiming, type HopClock } from '../telemetry/hop-clock.js';
import type { Metrics } from '../telemetry/metrics.js';
import type { Admission } from './admission.js';
import { clientResponseHeaders, upstreamRequestHeaders } from './headers.js';
import { causeOf, ClientGone, DROPPED, RetryStatus } from './failures.js';
import { createTap, type Tap, type Usage } from './sse-tap.js';
import type { UpstreamClient, UpstreamHandler } from './upstream/client.js';

export interface ForwardDeps {
  readonly upstream: UpstreamClient;
  readonly admission: Admission;
  readonly health: Health;
  readonly router: Router;
  readonly metrics: Metrics;
  readonly config: ResolvedConfig;
  byName(name: string): ReplicaState | undefined;
}

/** One client request on its way through the gateway. */
export interface Exchange {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly method: string;
  readonly path: string;
  readonly body: Buffer | null;
  readonly identity: RequestIdentity;
  readonly decision: Decision;
  readonly clock: HopClock;
  readonly draining: () => boolean;
}

/** What the access log and the metrics need once an exchange is over. */
export interface Outcome {
  status: number;
  /** The status came from a replica (it answered); false for the gateway's own error responses. */
  answered: boolean;
  replica: string | null;
  reason: RouteReason;
  attempts: number;
  usage: Usage | null;
  sse: boolean;
  done: boolean;
  aborted: boolean;
  error: WarmrouteError | null;
}

/**
 * Sends the request to the ranked replicas in turn until one answers, then streams its response
 * to the client byte for byte. A failure before any response byte moves on to the next replica
 * (at most limits.maxRetries times); after the first byte it never does: an SSE stream is ended
 * with one `data: {"error":...}` event. Resolves when the exchange is over, never rejects.
 */
export function forward(ex: Exchange, deps: ForwardDeps): Promise<Outcome> {
  const { config, metrics } = deps;
  const { res, clock, decision } = ex;
  const ranked = decision.ranked;
  const maxAttempts = Math.min(ranked.length, config.limits.maxRetries + 1);

  const out: Outcome = { status: 0, answered: false, replica: null, reason: decision.reason, attempts: 0, usage: null, sse: false, done: false, aborted: false, error: null };
  let replica: ReplicaState | null = null;
  let admitted = false;
  let abortUpstream: ((e: Error) => void) | null = null;
  let tap: Tap | null = null;
  let finished = false;
  let resolveDone!: (o: Outcome) => void;
  const done = new Promise<Outcome>((r) => { resolveDone = r; });

  const routeHeaders = () => (config.headers.route && replica ? ['x-warmroute-replica', replica.name, 'x-warmroute-route', out.reason] : config.headers.route ? ['x-warmroute-route', out.reason] : []);

  function finish() {
    if (finished) return;
    finished = true;
    // The response object outlives the exchange a little; what it reaches through this closure
    // should not (see upstream/client.ts on promotion).
    abortUpstream = null;
    if (admitted && replica) deps.admission.release(replica);
    admitted = false;
    if (tap) {
      tap.end();
      out.usage = tap.usage;
      out.done = tap.done;
    }
    resolveDone(out);
  }

  res.on('close', () => {
    if (finished || res.writableFinished) return;
    out.aborted = true;
    metrics.clientAborts.inc({ replica: replica?.name ?? 'none' });
    abortUpstream?.(new ClientGone('client disconnected'));
    clock.ended = nowMs();
    finish();
  });

  function fail(err: WarmrouteError) {
    out.error = err;
    out.status = err.statusCode;
    writeError(res, err, routeHeaders());
    clock.ended = nowMs();
    finish();
  }

  function attempt(i: number) {
    if (finished) return;
    const r = deps.byName(ranked[i].name);
    if (r === undefined) return fail(errors.internal([], null, new Error(`router ranked unknown replica ${ranked[i].name}`)));
    replica = r;
    out.replica = r.name;
    out.attempts = i + 1;
    if (i > 0) {
      out.reason = 'failover';
      metrics.decisions.inc({ reason: 'failover' });
    }
    const wait = deps.admission.acquire(r);
    if (wait === null) return dispatch(r, i);
    wait.then(
      () => {
        if (finished) { deps.admission.release(r); return; }
        dispatch(r, i);
      },
      (e: WarmrouteError) => { if (!finished) fail(e); },
    );
  }

  function dispatch(r: ReplicaState, i: number) {
    admitted = true;
    if (clock.admitted === 0) clock.admitted = nowMs();
    const isLast = i + 1 >= maxAttempts;
    let resume: (() => void) | null = null;
    let headersWritten = false;
    // The client socket, corked while one upstream read is handed on (see onReadStart).
    let corkedSocket: Socket | null = null;

    const handler: UpstreamHandler = {
      onConnect(abort) {
        abortUpstream = abort;
        if (finished) abort(new ClientGone('client disconnected'));
      },
      onRequestSent() {
        clock.sent = nowMs();
      },
      onHeaders(status, rawHeaders, res_resume) {
        clock.upstreamHeaders = nowMs();
        if ((status === 502 || status === 503) && !isLast) {
          abortUpstream?.(new RetryStatus(status));
          return false;
        }
        const { headers, contentType } = clientResponseHeaders(rawHeaders);
        out.sse = contentType.startsWith('text/event-stream');
        tap = createTap(!out.sse);
        out.status = status;
        out.answered = true;
        resume = res_resume;
        headers.push(...routeHeaders());
        if (config.headers.serverTiming) headers.push('server-timing', serverTiming(clock));
        if (ex.draining()) headers.push('connection', 'close');
        res.writeHead(status, headers);
        headersWritten = true;
        return true;
      },
      onData(chunk) {
        const first = tap!.scan(chunk);
        const flowing = res.write(chunk);
        if (first) clock.firstToken = nowMs();
        if (!flowing && resume) {
          res.once('drain', resume);
          return false;
        }
        return true;
      },
      // Everything one upstream read carries (the head and first event, several events, the last
      // event and the end) leaves in one syscall, at once when the read is handed on: no extra tick
      // before the first token. Corked on the socket itself, so the uncork always balances.
      onReadStart() {
        const sock = res.socket;
        if (sock && !sock.destroyed) {
          sock.cork();
          corkedSocket = sock;
        }
      },
      onReadEnd() {
        corkedSocket?.uncork();
        corkedSocket = null;
      },
      onComplete() {
        clock.ended = nowMs();
        res.end();
        finish();
      },
      onError(err) {
        if (err instanceof ClientGone || finished) { finish(); return; }
        if (!headersWritten) return failedBeforeResponse(r, i, isLast, err);
        failedMidStream(r, err);
      },
    };

    deps.upstream.dispatch({
      origin: r.origin,
      path: ex.path,
      method: ex.method,
      headers: upstreamRequestHeaders(ex.req, r.apiKey),
      body: ex.body,
      headersTimeout: config.timeouts.headersMs,
      bodyTimeout: config.timeouts.idleMs,
    }, handler);
  }

  function failedBeforeResponse(r: ReplicaState, i: number, isLast: boolean, err: Error) {
    const { cause, retry, down } = causeOf(err);
    if (down) deps.health.markDown(r, cause, err.message);
    deps.router.served(ex.identity, { replica: r.name, ok: false, upstreamTtftMs: null, promptTokens: null, cachedTokens: null });
    deps.admission.release(r);
    admitted = false;
    if (retry && !isLast) {
      metrics.retries.inc({ replica: r.name, cause });
      return attempt(i + 1);
    }
    if (cause === 'headers_timeout') return fail(errors.upstreamTimeout([r.name, config.timeouts.headersMs]));
    fail(isWarmrouteError(err) ? err : errors.upstreamUnavailable([r.name, cause === 'other' ? err.message : cause]));
  }

  function failedMidStream(r: ReplicaState, err: Error) {
    const code = (err as { code?: string }).code;
    const cause = code === 'WR_BODY_TIMEOUT' ? 'idle_timeout' : DROPPED.has(code ?? '') ? 'reset' : 'other';
    metrics.streamErrors.inc({ replica: r.name, cause });
    const e = errors.upstreamStream([r.name, cause === 'idle_timeout' ? `no data for ${config.timeouts.idleMs} ms` : cause === 'reset' ? 'connection lost' : err.message]);
    out.error = e;
    clock.ended = nowMs();
    if (out.sse && !res.hasHeader('content-length')) {
      // One error event, no [DONE]: OpenAI SDKs raise on it instead of returning a truncated answer.
      res.end(`\n\ndata: ${errorBody(e)}\n\n`);
    } else {
      res.destroy(e);
    }
    finish();
  }

  attempt(0);
  return done;
}
