import { isUtf8 } from 'node:buffer';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { ResolvedConfig } from '../config/schema.js';
import { errors, toWarmrouteError, writeError, type WarmrouteError } from '../errors.js';
import type { Registry } from '../fleet/registry.js';
import { identify, identityWithoutBody, validateBody, type IdentityOptions, type RequestIdentity, type RequestKind } from '../identify/identity.js';
import type { Limiter, Shed } from '../queue/limiter.js';
import type { Ended, Recorder } from '../record/record.js';
import { sessionTag } from '../record/record.js';
import type { Decision, Router } from '../routing/types.js';
import { nowMs, startClock, type HopClock } from '../telemetry/hop-clock.js';
import { forward, type ForwardDeps, type Outcome } from '../upstream/forward.js';
import type { Metrics } from '../telemetry/metrics.js';
import type { ClientKey, Keyring } from './api-keys.js';
import { discardBody, readBody } from './body.js';
import { modelsBody } from './models.js';
import { routeOf } from './routes.js';
import { requestTarget } from './target.js';

export interface PipelineDeps extends ForwardDeps {
  readonly registry: Registry;
  readonly router: Router;
  readonly recorder: Recorder;
  readonly log: Logger;
  readonly identity: IdentityOptions;
  readonly config: ResolvedConfig;
  readonly draining: () => boolean;
  readonly keyring: Keyring;
  /** limits.maxConcurrent and its queue. */
  readonly globalLimit: Limiter;
  readonly metrics: Metrics;
  /** Tracks open exchanges so a drain can wait for them. */
  track(p: Promise<unknown>): void;
  /**
   * Every exchange that reached its end, with the bytes received: fleet/ keeps keyed sessions' last
   * prompts (drain handoff) and counts shared prefixes (deploy warmup). Must be cheap.
   */
  served?(identity: RequestIdentity, target: string, body: Buffer | null, ended: Outcome): void;
}

const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i;

function parseJson(body: Buffer): unknown {
  if (body.length === 0) throw errors.invalidJson([': the body is empty']);
  // Decoding would silently turn invalid bytes into U+FFFD, and the bytes forwarded must be the
  // bytes received: refuse them instead.
  if (!isUtf8(body)) throw errors.invalidRequest(['The request body is not valid UTF-8']);
  try {
    return JSON.parse(body.toString('utf8'));
  } catch (e) {
    // V8's message quotes the body around the error: only the position is kept, so neither the
    // answer's log line nor anything else carries prompt text.
    const at = /position (\d+)/.exec((e as Error).message);
    throw errors.invalidJson([at ? ` (at character ${at[1]})` : '']);
  }
}

/** What the pipeline holds for one request until it is recorded. */
interface InFlight {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly clock: HopClock;
  path: string;
  /** The client's API key, once checked (keys configured). */
  key: ClientKey | null;
  /** Admitted under limits.maxConcurrent. */
  admitted: boolean;
}

/**
 * The data plane's one request pipeline: target → route table → API key → content type → body
 * (limit) → JSON (parsed once) → identity → routing → admission → forward → record. Every refusal
 * on the way is written by one error writer and recorded like any other request.
 */
export function createPipeline(deps: PipelineDeps): (req: IncomingMessage, res: ServerResponse) => void {
  // deps.config and deps.identity are read per request: a config reload replaces them.
  const { registry, router, recorder, log, keyring, metrics } = deps;
  const global = deps.globalLimit;
  const keyRetryAfter = ['retry-after', '1'];

  /** Everything a request holds is given back exactly once, however it ended. */
  function letGo(x: InFlight) {
    if (x.admitted) { x.admitted = false; global.release(); }
    if (x.key !== null) { x.key.open--; }
  }

  function record(x: InFlight, identity: RequestIdentity | null, ended: Ended) {
    letGo(x);
    recorder.record({ method: x.req.method ?? '', path: x.path, identity, clock: x.clock, ended, key: x.key?.name ?? null });
    x.key = null;
  }

  function refuse(x: InFlight, identity: RequestIdentity | null, e: unknown) {
    const err: WarmrouteError = toWarmrouteError(e);
    if (err.statusCode >= 500 && err.openaiCode === 'internal_error') log.error({ err: e, path: x.path }, 'internal error');
    writeError(x.res, err);
    x.clock.ended = nowMs();
    record(x, identity, { ending: 'failed', status: err.statusCode, replica: null, reason: null, attempts: 0, usage: null, sse: false, done: false, error: err, upstreamError: null });
  }

  /** Route, then the gateway-wide limit (the wait is the queue hop), then forward. */
  function routeAndForward(x: InFlight, target: string, identity: RequestIdentity, body: Buffer | null, resumable: Record<string, unknown> | undefined) {
    const decision = router.route({ identity, replicas: registry.views });
    x.clock.routed = nowMs();
    recorder.arrived(identity, x.clock);
    if (decision.drift) recorder.drift(identity, decision.drift);
    admit(x, () => forwardTo(x, target, identity, body, decision, resumable), (e) => refuse(x, identity, e));
  }

  function forwardTo(x: InFlight, target: string, identity: RequestIdentity, body: Buffer | null, decision: Decision, resumable: Record<string, unknown> | undefined) {
    const method = x.req.method ?? 'GET';
    const exchange = forward({ req: x.req, res: x.res, method, target, body, identity, decision, clock: x.clock, draining: deps.draining, stripAuthorization: !keyring.open, resumable }, deps)
      .then((ended) => {
        record(x, identity, ended);
        deps.served?.(identity, target, body, ended);
      });
    deps.track(exchange);
  }

  /** The gateway-wide limit: at once, after a bounded wait (the queue hop), or a 503. */
  function admit(x: InFlight, go: () => void, refused: (e: unknown) => void) {
    let wait: Promise<void> | null;
    try {
      wait = global.acquire();
    } catch (e) {
      metrics.shed.inc({ reason: `global_${(e as Shed).cause}` });
      return refused((e as Shed).error);
    }
    if (wait === null) {
      x.admitted = true;
      return go();
    }
    wait.then(() => {
      x.admitted = true;
      // The client may have gone while it waited.
      if (x.res.destroyed) return record(x, null, { ending: 'aborted', status: 0, replica: null, reason: null, attempts: 0, usage: null, sse: false, done: false, error: null, upstreamError: null });
      go();
    }, (e: Shed) => {
      metrics.shed.inc({ reason: `global_${e.cause}` });
      refused(e.error);
    });
  }

  function authorize(x: InFlight) {
    if (keyring.open) return;
    const key = keyring.check(x.req.headers.authorization);
    if (typeof key === 'string') {
      metrics.authFailures.inc({ reason: key });
      throw errors.invalidApiKey([key === 'missing' ? 'An API key is required: send it as Authorization: Bearer <key>' : 'Incorrect API key provided']);
    }
    if (key.maxConcurrent > 0 && key.open >= key.maxConcurrent) {
      metrics.shed.inc({ reason: 'key_limit' });
      throw errors.keyLimit([key.name, key.open], null, undefined, keyRetryAfter);
    }
    key.open++;
    x.key = key;
  }

  return function handle(req, res) {
    const x: InFlight = { req, res, clock: startClock(), path: req.url ?? '', key: null, admitted: false };
    const config = deps.config;
    const bodyLimits = { maxBytes: config.limits.bodyBytes };
    try {
      const target = requestTarget(req.url);
      x.path = target.path;
      const method = req.method ?? 'GET';
      const route = routeOf(target.path, method);
      authorize(x);
      if (route === null) throw errors.notFound([method, target.path]);
      if (route.kind === null) throw errors.methodNotAllowed([method, route.allowed.join(', ')], null, undefined, ['allow', route.allowed.join(', ')]);
      if (deps.draining()) throw errors.shuttingDown();
      const kind = route.kind;
      if ('models' in kind) {
        const text = modelsBody(registry);
        if (text === null) throw errors.noReplica();
        res.writeHead(200, ['content-type', 'application/json']);
        res.end(method === 'HEAD' ? undefined : text);
        x.clock.ended = nowMs();
        record(x, null, { ending: 'complete', status: 200, replica: null, reason: null, attempts: 0, usage: null, sse: false, done: false, error: null, upstreamError: null });
        return;
      }
      const json: RequestKind | null = 'json' in kind ? kind.json : null;
      const type = req.headers['content-type'];
      if (json !== null && type !== undefined && !JSON_TYPE.test(type)) throw errors.unsupportedMediaType([JSON.stringify(type.slice(0, 100))]);
      readBody(req, bodyLimits, (bodyErr, body) => {
        let identity: RequestIdentity | null = null;
        let resumable: Record<string, unknown> | undefined;
        try {
          if (bodyErr) throw bodyErr;
          if (json === null) {
            identity = identityWithoutBody(req.headers, deps.identity, 'responseId' in kind ? kind.responseId ?? null : null);
          } else {
            const parsed = parseJson(body!);
            validateBody(json, parsed, deps.identity);
            identity = identify(json, parsed, req.headers, deps.identity);
            // Kept for mid-stream resume only (opt-in): a streamed chat completion.
            if (config.resume.enabled && json === 'chat' && parsed.stream === true) resumable = parsed;
            if (config.logging.logPrompts) log.debug({ session: sessionTag(identity.sessionKey), body: parsed }, 'request body');
          }
          x.clock.parsed = nowMs();
          routeAndForward(x, target.path + target.search, identity, body, resumable);
        } catch (e) {
          refuse(x, identity, e);
        }
      });
    } catch (e) {
      // Refused before the body was read: read and drop it (bounded) so the answer gets through.
      discardBody(req);
      refuse(x, null, e);
    }
  };
}
