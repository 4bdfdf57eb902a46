import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { errors, writeError, type WarmrouteError } from '../errors.js';
import type { Registry } from '../fleet/registry.js';
import { identify, validateBody, type IdentityOptions, type RequestKind } from '../routing/identity.js';
import type { RequestIdentity } from '../routing/types.js';
import { nowMs, type HopClock } from '../telemetry/hop-clock.js';
import { createRequestMetrics, type RequestMetrics } from '../telemetry/metrics.js';
import { forward, type ForwardDeps } from './forward.js';
import { recordExchange, sessionTag } from './record.js';

export interface ProxyDeps extends ForwardDeps {
  readonly registry: Registry;
  readonly log: Logger;
  readonly identityOptions: IdentityOptions;
  readonly draining: () => boolean;
  /** Tracks open exchanges so a drain can wait for them. */
  track(p: Promise<unknown>): void;
}

export interface Proxy {
  readonly requestMetrics: RequestMetrics;
  /** Routes and forwards one request whose identity is known; resolves when it is over. */
  proxy(req: IncomingMessage, res: ServerResponse, identity: RequestIdentity, body: Buffer | null, clock: HopClock): Promise<void>;
  /** Parses a chat/completions body (the one JSON.parse of the request) and proxies it. */
  completion(kind: RequestKind, req: IncomingMessage, res: ServerResponse, body: Buffer, clock: HopClock): Promise<void>;
  /** Answers with an OpenAI-style error, counted and logged (for requests never routed). */
  reject(req: IncomingMessage, res: ServerResponse, err: WarmrouteError): void;
}

function parseJson(body: Buffer): unknown {
  if (body.length === 0) throw errors.invalidJson(['the body is empty']);
  try {
    return JSON.parse(body.toString('utf8'));
  } catch (e) {
    throw errors.invalidJson([(e as Error).message]);
  }
}

export function createProxy(deps: ProxyDeps): Proxy {
  const { config, registry, router, log } = deps;
  const requestMetrics = createRequestMetrics(deps.metrics);
  const recordDeps = { requestMetrics, log, router };

  async function proxy(req: IncomingMessage, res: ServerResponse, identity: RequestIdentity, body: Buffer | null, clock: HopClock) {
    if (deps.draining()) throw errors.shuttingDown();
    if (clock.parsed === 0) clock.parsed = nowMs();
    const decision = router.route({ identity, replicas: registry.views });
    clock.routed = nowMs();
    requestMetrics.decisions(decision.reason).inc();
    const method = req.method ?? 'GET';
    const path = req.url ?? '/';
    const exchange = forward({ req, res, method, path, body, identity, decision, clock, draining: deps.draining }, deps);
    deps.track(exchange);
    const outcome = await exchange;
    recordExchange(recordDeps, { method, path, identity, clock, outcome });
  }

  return {
    requestMetrics,
    proxy,
    completion(kind, req, res, body, clock) {
      const parsed = parseJson(body);
      validateBody(kind, parsed);
      const identity = identify(kind, parsed, req.headers, deps.identityOptions);
      clock.parsed = nowMs();
      if (config.logging.logPrompts) log.debug({ session: sessionTag(identity.sessionKey), body: parsed }, 'request body');
      return proxy(req, res, identity, body, clock);
    },
    reject(req, res, err) {
      requestMetrics.requests('none', 'none', `${Math.floor(err.statusCode / 100)}xx`).inc();
      log.info({ method: req.method, path: req.url, status: err.statusCode, err: err.openaiCode, detail: err.message }, 'request');
      writeError(res, err);
    },
  };
}
