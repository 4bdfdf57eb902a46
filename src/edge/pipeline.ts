import { isUtf8 } from 'node:buffer';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { ResolvedConfig } from '../config/schema.js';
import { errors, toWarmrouteError, writeError, type ErrorShape, type WarmrouteError } from '../errors.js';
import type { Registry } from '../fleet/registry.js';
import { identify, identityWithoutBody, validateBody, type IdentityOptions, type RequestIdentity, type RequestKind } from '../identify/identity.js';
import { Shed, type Limiter } from '../queue/limiter.js';
import type { AdapterNote, Ended, Recorder } from '../record/record.js';
import type { AdapterLoader } from '../fleet/adapter-loader.js';
import type { TurnCall } from '../record/turns.js';
import type { SpeechEnd } from '../record/voice-turns.js';
import type { Decision, Router } from '../routing/types.js';
import { nowMs, startClock, type HopClock } from '../telemetry/hop-clock.js';
import { createExchangeOwner, type ExchangeOwner, type ExchangeOwnerDeps } from '../upstream/exchange.js';
import { forward, type ForwardDeps } from '../upstream/forward.js';
import type { Metrics } from '../telemetry/metrics.js';
import type { RequestTrace } from '../telemetry/tracing/request-trace.js';
import type { Tracing } from '../telemetry/tracing/tracing.js';
import type { Keyring } from './api-keys.js';
import { discardBody, readBody } from './body.js';
import { modelsBody } from './models.js';
import { errorShapeOf, routeOf } from './routes.js';
import { priorityOf, type Priority } from '../queue/priority.js';
import { bodyWithFields } from './body-fields.js';
import { withModel } from './body-model.js';
import type { AdapterVersions } from '../routing/adapter-versions.js';
import { createToolGuard, type ToolRequest } from './tool-guard.js';
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
  /** OpenTelemetry traces; absent or null when off (then no span object is made). */
  readonly tracing?: Tracing | null;
  /** Client model names rolled out over adapter versions (adapters.versions); absent: none. */
  readonly versions?: AdapterVersions;
  /** LoRA adapters loaded on demand (adapters.sources); absent: the gateway never loads one. */
  readonly adapters?: AdapterLoader;
  /** Counts open exchanges (from their first byte to their end) so a drain can wait for them: once each, then `exchangeClosed` once. */
  exchangeOpened(): void;
  exchangeClosed(): void;
  /**
   * Every exchange that reached its end, with the bytes received: fleet/ keeps keyed sessions' last
   * prompts (drain handoff) and counts shared prefixes (deploy warmup). Must be cheap.
   */
  served?(identity: RequestIdentity, target: string, body: Buffer | null, ended: Ended): void;
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
 * What the pipeline knows of one request until it is recorded; its slots are its owner's. A class:
 * every request's object has the one shape, and its owner gets it back in `report`.
 */
class InFlight {
  path: string;
  /** The client's API key's name, once checked (keys configured). */
  key: string | null = null;
  identity: RequestIdentity | null = null;
  /** Set once forwarded: what fleet/ is told of the exchange when it ends. */
  target: string | null = null;
  body: Buffer | null = null;
  /** A chat or Messages request: what the tool-call guard made of it. */
  tools: ToolRequest | null = null;
  /** The shape its errors are written in: its path's API (edge/routes.ts errorShapeOf). */
  api: ErrorShape = 'openai';
  /** Its priority class and place in the queues (queue/priority.ts), once the body is read. */
  priority: Priority | null = null;
  /** The API key's configured class, once checked. */
  keyClass: 'interactive' | 'batch' | null = null;
  /** Its call in its session's caller turn (record/turns.ts), once routed. */
  turn: TurnCall | null = null;
  /** The version chosen for its model name and the adapter load it waited for, when either happened. */
  adapter: AdapterNote | null = null;
  /** Its parsed JSON body and kind (a version rollout re-identifies it under the version's name). */
  parsed: Record<string, unknown> | null = null;
  json: RequestKind | null = null;
  /** The caller's speech end (a realtime connection of its session) this request answers, once routed. */
  voice: SpeechEnd | null = null;
  readonly owner: ExchangeOwner<Ended>;

  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    readonly clock: HopClock,
    /** Its spans, when tracing is on. */
    readonly trace: RequestTrace | null,
    ownerDeps: ExchangeOwnerDeps<Ended, InFlight>,
  ) {
    this.path = req.url ?? '';
    this.owner = createExchangeOwner(res, ownerDeps, this);
  }
}

/** The request's adapter note, made when something is first noted in it. */
const noteOf = (x: InFlight): AdapterNote => (x.adapter ??= { requested: null, loadMs: null, adapter: null, slot: null });

/** How an exchange the edge ended itself (never forwarded) is recorded. */
const endedAtEdge = (ending: Ended['ending'], status: number, error: WarmrouteError | null): Ended =>
  ({ ending, status, replica: null, reason: null, attempts: 0, usage: null, sse: false, done: false, error, upstreamError: null });

const ABORTED: Ended = Object.freeze(endedAtEdge('aborted', 0, null));

/**
 * The data plane's one request pipeline: target → route table → API key → content type → body
 * (limit) → JSON (parsed once) → identity → routing → admission → forward → record. Every refusal
 * on the way is written by one error writer and recorded like any other request. Each exchange's
 * slots are held by its owner (upstream/exchange.ts), created here with the exchange: whatever
 * way it ends (answered, refused, client gone mid-upload or in a queue, stalled, shut down), the
 * owner gives every slot back once and the exchange gets its one access line.
 */
export function createPipeline(deps: PipelineDeps): (req: IncomingMessage, res: ServerResponse) => void {
  // deps.config and deps.identity are read per request: a config reload replaces them.
  const { registry, router, recorder, log, keyring, metrics } = deps;
  const global = deps.globalLimit;
  const keyRetryAfter = ['retry-after', '1'];
  const shutdownRetryAfter = ['retry-after', '1'];
  const clientGone = (replica: string | null) => metrics.clientAborts.inc({ replica: replica ?? 'none' });
  const toolGuard = createToolGuard({ metrics, log });
  /** The caller a tool-call warning names: its API key, else its session's tag. */
  const callerOf = (x: InFlight) => x.key ?? recorder.sessionTag(x.identity!.sessionKey ?? x.identity!.placementKey) ?? 'anonymous';

  /**
   * Called by the owner's end, from undici's handler or the response's 'close'; the recording runs
   * a moment later (recordEnded). A throw there (a bug in the recorder, the router's feedback or
   * fleet/) is logged, and the rest of its batch still recorded; the exchange's slots are already back.
   */
  function report(x: InFlight, ended: Ended) {
    if (x.clock.ended === 0) x.clock.ended = nowMs();
    // Recorded after the I/O callbacks of this turn of the event loop (setImmediate, one batch for
    // every exchange that ended in it): the other streams' chunks and first tokens waiting in the
    // same turn go out before this one's bookkeeping. The slots are back already.
    ending.push(x, ended);
    if (ending.length === 2) setImmediate(recordEnded);
  }

  const ending: (InFlight | Ended)[] = [];
  function recordEnded() {
    const batch = ending.splice(0);
    for (let i = 0; i < batch.length; i += 2) recordOne(batch[i] as InFlight, batch[i + 1] as Ended);
  }

  function recordOne(x: InFlight, ended: Ended) {
    try {
      recorder.record({ method: x.req.method ?? '', path: x.path, identity: x.identity, clock: x.clock, ended, key: x.key, trace: x.trace, priority: x.priority?.cls ?? null, turn: x.turn, adapter: x.adapter, voice: x.voice });
      if (x.target !== null && x.identity !== null) deps.served?.(x.identity, x.target, x.body, ended);
    } catch (err) {
      log.error({ err, path: x.path }, 'internal error: recording an ended exchange failed');
    }
  }

  function refuse(x: InFlight, e: unknown) {
    if (x.owner.ended) return;
    const err: WarmrouteError = toWarmrouteError(e);
    if (err.statusCode >= 500 && err.openaiCode === 'internal_error') log.error({ err: e, path: x.path }, 'internal error');
    writeError(x.res, err, [], x.api);
    x.clock.ended = nowMs();
    x.owner.end(endedAtEdge('failed', err.statusCode, err));
  }

  /**
   * A client model name of adapters.versions: its version chosen (kept per session, through the
   * shared store), the body's `model` spliced to it, the request identified under it. Then routed.
   */
  function routeAndForward(x: InFlight, target: string, body: Buffer | null, resumable: Record<string, unknown> | undefined, streamed: boolean) {
    const versions = deps.versions;
    const model = x.identity!.model;
    if (versions === undefined || x.parsed === null || !versions.has(model)) return routeWithStored(x, target, body, resumable, streamed);
    const fetching = versions.prefetch(model, x.identity!.sessionKey);
    if (fetching === null) return routeWithStored(x, target, withVersion(x, versions, model, body!), resumable, streamed);
    fetching.then(() => {
      if (!x.owner.ended) routeWithStored(x, target, withVersion(x, versions, model, body!), resumable, streamed);
    }).catch((e: unknown) => refuse(x, e));
  }

  function withVersion(x: InFlight, versions: AdapterVersions, requested: string, body: Buffer): Buffer {
    const id = x.identity!;
    const { version } = versions.choose(requested, id.sessionKey, id.placementKey, Date.now());
    // The parsed body is the resumable one too: a continuation names the version.
    const parsed = x.parsed!;
    parsed.model = version;
    x.identity = identify(x.json!, parsed, x.req.headers, deps.identity);
    noteOf(x).requested = requested;
    return withModel(body, version) ?? Buffer.from(JSON.stringify(parsed));
  }

  /** Route, then the gateway-wide limit (the wait is the queue hop), then forward. */
  function routeWithStored(x: InFlight, target: string, body: Buffer | null, resumable: Record<string, unknown> | undefined, streamed: boolean) {
    // A stored response with no local record: the shared store is read first (bounded, counted).
    const fetching = router.prefetch?.(x.identity!) ?? null;
    if (fetching !== null) return void fetching.then(() => routeNow(x, target, body, resumable, streamed)).catch((e: unknown) => refuse(x, e));
    routeNow(x, target, body, resumable, streamed);
  }

  function routeNow(x: InFlight, target: string, body: Buffer | null, resumable: Record<string, unknown> | undefined, streamed: boolean) {
    // The client may have gone during the read or the prefetch: its owner has ended the exchange already.
    if (x.owner.ended) return;
    const identity = x.identity!;
    const loader = deps.adapters;
    const model = identity.model;
    // An adapter of adapters.sources that no replica taking traffic lists: placed among those that could load it.
    const loadable = loader?.loadable(model, registry.views) ?? null;
    const decision = router.route(loadable === null ? { identity, replicas: registry.views } : { identity, replicas: registry.views, loadable });
    x.clock.routed = nowMs();
    x.trace?.routed(decision.matchedTokens);
    x.turn = recorder.arrived(identity, x.clock);
    x.voice = recorder.voiceArrived(identity, x.clock);
    if (decision.drift) recorder.drift(identity, decision.drift);
    if (decision.slotWait) recorder.slotWait(identity, decision.ranked[0].name);
    if (decision.adapterSlot !== undefined) {
      const note = noteOf(x);
      note.adapter = model;
      note.slot = decision.adapterSlot;
    }
    // A managed adapter in use on its replica is not unloaded there until this exchange ends.
    if (loader !== undefined && loader.manages(model)) x.owner.holdAdapter(decision.ranked[0].name, model);
    if (loadable === null) return admit(x, () => forwardTo(x, target, body, decision, resumable, streamed));
    const chosen = registry.byName(decision.ranked[0].name)!;
    // Where it is loaded already: forwarded as any request, its failover kept to replicas that have it.
    if (chosen.adapters.has(model!)) {
      const having: Decision = { ...decision, ranked: decision.ranked.filter((r) => r.adapters?.has(model!)) };
      return admit(x, () => forwardTo(x, target, body, having, resumable, streamed));
    }
    // Loaded where routing placed it, then forwarded there only (no other replica has it yet). The
    // wait is the queue hop's; a client that goes meanwhile is ended by its owner, the load goes on.
    const only: Decision = { ...decision, ranked: [chosen] };
    loader!.ensure(chosen, model!).then((change) => {
      if (change !== null) {
        noteOf(x).loadMs = change.ms;
        x.trace?.adapterLoaded(change.replica, change.adapter, change.outcome, change.ms, nowMs());
      }
      if (!x.owner.ended) admit(x, () => forwardTo(x, target, body, only, resumable, streamed));
    }, (e: unknown) => refuse(x, e));
  }

  function forwardTo(x: InFlight, target: string, body: Buffer | null, decision: Decision, resumable: Record<string, unknown> | undefined, streamed: boolean) {
    x.target = target;
    x.body = body;
    forward({ req: x.req, owner: x.owner, method: x.req.method ?? 'GET', target, body, identity: x.identity!, decision, clock: x.clock, draining: deps.draining, stripAuthorization: !keyring.open, api: x.api, resumable, streamed, trace: x.trace, tools: x.tools, place: x.priority, adapterVersion: x.adapter?.requested != null ? x.identity!.model : null, managedAdapter: deps.adapters?.manages(x.identity!.model) ? x.identity!.model : null }, deps);
  }

  function refusedForLoad(x: InFlight, e: unknown) {
    if (e instanceof Shed) {
      metrics.shed.inc({ reason: `global_${e.cause}` });
      return refuse(x, e.error);
    }
    refuse(x, e);
  }

  /** The gateway-wide limit: at once, after a bounded wait (the queue hop), or a 503. */
  function admit(x: InFlight, go: () => void) {
    let wait: Promise<void> | null;
    try {
      wait = global.acquire(x.priority ?? undefined);
    } catch (e) {
      return refusedForLoad(x, e);
    }
    if (wait === null) {
      if (x.owner.holdGlobal()) go();
      return;
    }
    // The client may go while it waits: its owner ends it and gives its place in the queue up.
    const w = wait;
    x.owner.waiting(() => global.cancel(w));
    w.then(() => { x.owner.waiting(null); if (x.owner.holdGlobal()) go(); }, (e: unknown) => { x.owner.waiting(null); refusedForLoad(x, e); });
  }

  function authorize(x: InFlight) {
    if (keyring.open) return;
    // Anthropic's SDKs send their key as x-api-key, not as a bearer token.
    const apiKey = x.req.headers['x-api-key'];
    const key = keyring.check(x.req.headers.authorization ?? (typeof apiKey === 'string' ? `Bearer ${apiKey}` : undefined));
    if (typeof key === 'string') {
      metrics.authFailures.inc({ reason: key });
      throw errors.invalidApiKey([key === 'missing' ? 'An API key is required: send it as Authorization: Bearer <key>' : 'Incorrect API key provided']);
    }
    if (key.maxConcurrent > 0 && key.open >= key.maxConcurrent) {
      metrics.shed.inc({ reason: 'key_limit' });
      throw errors.keyLimit([key.name, key.open], null, undefined, keyRetryAfter);
    }
    x.owner.holdKey(key);
    x.key = key.name;
    x.keyClass = key.priority;
  }

  // One for every exchange: each owner hands its own InFlight back to report.
  const ownerDeps: ExchangeOwnerDeps<Ended, InFlight> = {
    admission: deps.admission, global, report: (e, x) => report(x, e), aborted: () => ABORTED, clientGone, settled: () => deps.exchangeClosed(),
    adapters: deps.adapters?.holds,
  };

  return function handle(req, res) {
    const clock = startClock();
    const x = new InFlight(req, res, clock, deps.tracing?.begin(req.headers, req.method ?? 'GET', clock.received) ?? null, ownerDeps);
    deps.exchangeOpened();
    const config = deps.config;
    const bodyLimits = { maxBytes: config.limits.bodyBytes };
    try {
      const target = requestTarget(req.url);
      x.path = target.path;
      x.api = errorShapeOf(target.path);
      const method = req.method ?? 'GET';
      const route = routeOf(target.path, method, config.routes.extraPaths);
      authorize(x);
      if (route === null) throw errors.notFound([method, target.path]);
      if (route.kind === null) throw errors.methodNotAllowed([method, route.allowed.join(', ')], null, undefined, ['allow', route.allowed.join(', ')]);
      if (deps.draining()) throw errors.shuttingDown([], null, undefined, shutdownRetryAfter);
      const kind = route.kind;
      if ('models' in kind) {
        const text = modelsBody(registry, { clientNames: deps.versions?.names() ?? new Map(), sources: deps.adapters?.sources() ?? [] });
        if (text === null) throw errors.noReplica();
        res.writeHead(200, ['content-type', 'application/json']);
        res.end(method === 'HEAD' ? undefined : text);
        clock.ended = nowMs();
        x.owner.end(endedAtEdge('complete', 200, null));
        return;
      }
      const json: RequestKind | null = 'json' in kind ? kind.json : null;
      const type = req.headers['content-type'];
      if (json !== null && type !== undefined && !JSON_TYPE.test(type)) throw errors.unsupportedMediaType([JSON.stringify(type.slice(0, 100))]);
      readBody(req, bodyLimits, (bodyErr, body) => {
        // The client went away mid-upload: its owner has already ended the exchange.
        if (x.owner.ended) return;
        let resumable: Record<string, unknown> | undefined;
        let streamed = true;
        let sent = body;
        try {
          if (bodyErr) throw bodyErr;
          if (json === null) {
            x.identity = identityWithoutBody(req.headers, deps.identity, 'responseId' in kind ? kind.responseId ?? null : null);
          } else {
            const parsed = parseJson(body!);
            validateBody(json, parsed, deps.identity);
            x.identity = identify(json, parsed, req.headers, deps.identity);
            x.parsed = parsed;
            x.json = json;
            // Only a generation answers when it is done; anything else answers at once.
            streamed = json === 'other' || parsed.stream === true;
            // Kept for mid-stream resume only (opt-in): a streamed chat completion.
            if (config.resume.enabled && json === 'chat' && streamed) resumable = parsed;
            if (config.logging.logPrompts) log.debug({ session: recorder.sessionTag(x.identity.sessionKey), body: parsed }, 'request body');
            if (json === 'chat' || json === 'messages') x.tools = toolGuard.prepare(parsed, config.tools.minMaxTokens, callerOf, x, json);
            x.priority = priorityOf({ keyClass: x.keyClass, headers: req.headers, body: json === 'other' ? null : parsed, hasSession: x.identity.sessionKey !== null, arrivedAt: clock.received, options: config.priority });
            // vLLM's Messages endpoint takes no `priority` (its request model has none and drops
            // unknown fields): the class orders the gateway's queues only, and the bytes go as sent.
            const inject = x.priority.inject === null || json === 'messages' ? null : { priority: x.priority.inject };
            sent = bodyWithFields(parsed, body!, x.tools?.fields ?? null, inject);
          }
          clock.parsed = nowMs();
          x.priority ??= priorityOf({ keyClass: x.keyClass, headers: req.headers, body: null, hasSession: x.identity.sessionKey !== null, arrivedAt: clock.received, options: config.priority });
          routeAndForward(x, target.path + target.search, sent, resumable, streamed);
        } catch (e) {
          refuse(x, e);
        }
      });
    } catch (e) {
      // Refused before the body was read: read and drop it (bounded) so the answer gets through.
      discardBody(req);
      refuse(x, e);
    }
  };
}
