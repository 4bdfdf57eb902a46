import { isUtf8 } from 'node:buffer';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { ResolvedConfig } from '../config/schema.js';
import { errors, toWarmrouteError, writeError, type WarmrouteError } from '../errors.js';
import type { Registry } from '../fleet/registry.js';
import { identify, identityWithoutBody, validateBody, type IdentityOptions, type RequestIdentity, type RequestKind } from '../identify/identity.js';
import type { Recorder } from '../record/record.js';
import { sessionTag } from '../record/record.js';
import type { Router } from '../routing/types.js';
import { nowMs, startClock, type HopClock } from '../telemetry/hop-clock.js';
import { forward, type ForwardDeps, type Outcome } from '../upstream/forward.js';
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

/**
 * The data plane's one request pipeline: target → route table → content type → body (limit) →
 * JSON (parsed once) → identity → routing → forward → record. Every refusal on the way is written
 * by one error writer and recorded like any other request.
 */
export function createPipeline(deps: PipelineDeps): (req: IncomingMessage, res: ServerResponse) => void {
  // deps.config and deps.identity are read per request: a config reload replaces them.
  const { registry, router, recorder, log } = deps;

  function refuse(req: IncomingMessage, res: ServerResponse, path: string, clock: HopClock, identity: RequestIdentity | null, e: unknown) {
    const err: WarmrouteError = toWarmrouteError(e);
    if (err.statusCode >= 500 && err.openaiCode === 'internal_error') log.error({ err: e, path }, 'internal error');
    writeError(res, err);
    clock.ended = nowMs();
    recorder.record({ method: req.method ?? '', path, identity, clock, ended: { ending: 'failed', status: err.statusCode, replica: null, reason: null, attempts: 0, usage: null, sse: false, done: false, error: err, upstreamError: null } });
  }

  function routeAndForward(req: IncomingMessage, res: ServerResponse, target: string, path: string, identity: RequestIdentity, body: Buffer | null, clock: HopClock) {
    const decision = router.route({ identity, replicas: registry.views });
    clock.routed = nowMs();
    const method = req.method ?? 'GET';
    const exchange = forward({ req, res, method, target, body, identity, decision, clock, draining: deps.draining }, deps)
      .then((ended) => {
        recorder.record({ method, path, identity, clock, ended });
        deps.served?.(identity, target, body, ended);
      });
    deps.track(exchange);
  }

  return function handle(req, res) {
    const clock = startClock();
    const config = deps.config;
    const bodyLimits = { maxBytes: config.limits.bodyBytes };
    let path = req.url ?? '';
    try {
      const target = requestTarget(req.url);
      path = target.path;
      const method = req.method ?? 'GET';
      const route = routeOf(target.path, method);
      if (route === null) throw errors.notFound([method, target.path]);
      if (route.kind === null) throw errors.methodNotAllowed([method, route.allowed.join(', ')], null, undefined, ['allow', route.allowed.join(', ')]);
      if (deps.draining()) throw errors.shuttingDown();
      const kind = route.kind;
      if ('models' in kind) {
        const text = modelsBody(registry);
        if (text === null) throw errors.noReplica();
        res.writeHead(200, ['content-type', 'application/json']);
        res.end(method === 'HEAD' ? undefined : text);
        clock.ended = nowMs();
        recorder.record({ method, path, identity: null, clock, ended: { ending: 'complete', status: 200, replica: null, reason: null, attempts: 0, usage: null, sse: false, done: false, error: null, upstreamError: null } });
        return;
      }
      const json: RequestKind | null = 'json' in kind ? kind.json : null;
      const type = req.headers['content-type'];
      if (json !== null && type !== undefined && !JSON_TYPE.test(type)) throw errors.unsupportedMediaType([JSON.stringify(type.slice(0, 100))]);
      const query = target.search;
      readBody(req, bodyLimits, (bodyErr, body) => {
        let identity: RequestIdentity | null = null;
        try {
          if (bodyErr) throw bodyErr;
          if (json === null) {
            identity = identityWithoutBody(req.headers, deps.identity);
          } else {
            const parsed = parseJson(body!);
            validateBody(json, parsed, deps.identity);
            identity = identify(json, parsed, req.headers, deps.identity);
            if (config.logging.logPrompts) log.debug({ session: sessionTag(identity.sessionKey), body: parsed }, 'request body');
          }
          clock.parsed = nowMs();
          routeAndForward(req, res, target.path + query, path, identity, body, clock);
        } catch (e) {
          refuse(req, res, path, clock, identity, e);
        }
      });
    } catch (e) {
      // Refused before the body was read: read and drop it (bounded) so the answer gets through.
      discardBody(req, bodyLimits.maxBytes);
      refuse(req, res, path, clock, null, e);
    }
  };
}
