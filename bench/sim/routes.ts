// The HTTP surface of one replica: vLLM's OpenAI server routes plus the /sim/* admin routes.

import type { IncomingMessage, ServerResponse } from 'node:http';
import { errors, type HttpError } from './errors.js';
import { parseFault, type Fault, type FaultKind } from './faults.js';
import { serveGeneration, type GenContext } from './generate.js';
import { randomHex } from './hash.js';
import { pushText } from './tokenizer.js';
import { isObj, parseChat, parseCompletion, type GenRequest } from './request.js';
import { parseResponses } from './responses-request.js';
import { anthropicError, countTokens, parseMessages } from './messages-request.js';

export interface RouteDeps {
  gen: GenContext;
  metricsText(): string;
  state(): unknown;
  fault(f: Fault): void;
  clearFaults(kind?: FaultKind): void;
  reset(): void;
  /** Generation responses in flight. */
  live: Set<ServerResponse>;
  /** Responses held open by the stall fault. */
  held: Set<ServerResponse>;
}

function send(res: ServerResponse, status: number, body: string, type = 'application/json'): void {
  res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

function sendError(res: ServerResponse, e: HttpError): void {
  send(res, e.status, e.body);
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
    req.on('error', reject);
  });
}

/** vLLM's POST /tokenize for a plain prompt: its count under the simulator's tokenizer. */
async function tokenize(deps: RouteDeps, req: IncomingMessage, res: ServerResponse): Promise<void> {
  let body: { prompt?: unknown };
  try {
    body = JSON.parse(await readBody(req)) as { prompt?: unknown };
  } catch {
    return sendError(res, errors.badRequest('Invalid JSON body'));
  }
  if (typeof body.prompt !== 'string') return sendError(res, errors.badRequest('prompt: a string is required'));
  const tokens: number[] = [];
  pushText(tokens, body.prompt);
  send(res, 200, JSON.stringify({ count: tokens.length, max_model_len: deps.gen.cfg.maxModelLen, tokens, token_strs: null }));
}

function hold(deps: RouteDeps, res: ServerResponse): void {
  deps.gen.counters.stalled++;
  deps.held.add(res);
  res.on('close', () => deps.held.delete(res));
}

function modelsBody(deps: RouteDeps): string {
  const { cfg } = deps.gen;
  const created = Math.floor(Date.now() / 1000);
  return JSON.stringify({
    object: 'list',
    data: [
      {
        id: cfg.model,
        object: 'model',
        created,
        owned_by: 'vllm',
        root: cfg.root,
        parent: null,
        max_model_len: cfg.maxModelLen,
        permission: [
          {
            id: `modelperm-${randomHex(16)}`,
            object: 'model_permission',
            created,
            allow_create_engine: false,
            allow_sampling: true,
            allow_logprobs: true,
            allow_search_indices: false,
            allow_view: true,
            allow_fine_tuning: false,
            organization: '*',
            group: null,
            is_blocking: false,
          },
        ],
      },
      ...deps.gen.lora.modelEntries(cfg.model, created),
    ],
  });
}

type Parse = (body: unknown, gen: RouteDeps['gen']) => GenRequest | HttpError;

const PARSERS: Record<string, Parse> = {
  '/v1/chat/completions': (b, gen) => parseChat(b, gen.cfg),
  '/v1/completions': (b, gen) => parseCompletion(b, gen.cfg),
  '/v1/responses': (b, gen) => parseResponses(b, gen.cfg, gen.responses, gen.cfg.enableResponsesStore),
  '/v1/messages': (b, gen) => parseMessages(b, gen.cfg),
};

/** vLLM's POST /v1/messages/count_tokens: the prompt's tokens, no generation. */
async function messagesCountTokens(deps: RouteDeps, req: IncomingMessage, res: ServerResponse): Promise<void> {
  let body: unknown;
  try {
    body = JSON.parse(await readBody(req));
  } catch (e) {
    const message = (e as Error).message;
    return sendError(res, errors.invalidJson(message, Number(/at position (\d+)/.exec(message)?.[1] ?? 0)));
  }
  const out = countTokens(body, deps.gen.cfg);
  if (typeof out !== 'string') return sendError(res, out);
  send(res, 200, out);
}

async function generation(deps: RouteDeps, req: IncomingMessage, res: ServerResponse, parse: Parse, path: string): Promise<void> {
  const arrival = performance.now();
  const { gen } = deps;
  const body = await readBody(req);
  const reject = (e: HttpError) => {
    gen.counters.rejected++;
    sendError(res, e);
  };
  if (gen.faults.get('unhealthy')) {
    gen.counters.rejected++;
    send(res, 500, '', 'text/plain');
    return;
  }
  // Errors vLLM's Messages handler meets are translated into Anthropic's shape (messages-request.ts).
  const shaped = path === '/v1/messages' ? anthropicError : (e: HttpError) => e;
  if (gen.faults.take('busy')) return reject(shaped(errors.busy(gen.engine.waiting())));
  if (gen.faults.take('stall')) return hold(deps, res);
  const mediaType = (req.headers['content-type'] ?? '').split(';', 1)[0].trim().toLowerCase();
  if (mediaType !== 'application/json') return reject(errors.unsupportedMediaType());
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch (e) {
    const message = (e as Error).message;
    return reject(errors.invalidJson(message, Number(/at position (\d+)/.exec(message)?.[1] ?? 0)));
  }
  // An adapter's name stands for the base model in validation; the engine runs it with the adapter.
  const model = isObj(parsed) ? parsed.model : undefined;
  const lora = typeof model === 'string' && model !== gen.cfg.model && gen.lora.has(model) ? model : undefined;
  const g = parse(lora === undefined ? parsed : { ...(parsed as object), model: gen.cfg.model }, gen);
  if ('status' in g) return reject(g);
  if (lora !== undefined) g.lora = lora;
  if (gen.engine.waiting() + gen.inFrontend.n >= gen.cfg.maxWaiting) {
    return reject(shaped(errors.busy(gen.engine.waiting() + gen.inFrontend.n)));
  }
  deps.live.add(res);
  res.on('close', () => deps.live.delete(res));
  serveGeneration(gen, res, g, arrival, { traceparent: req.headers.traceparent, tracestate: req.headers.tracestate });
}

async function admin(deps: RouteDeps, req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
  const body = await readBody(req);
  if (path === '/sim/state' && req.method === 'GET') return send(res, 200, JSON.stringify(deps.state()));
  if (path === '/sim/reset' && req.method === 'POST') {
    deps.reset();
    return send(res, 200, JSON.stringify({ ok: true }));
  }
  if (path === '/sim/fault' && req.method === 'POST') {
    let f: Fault;
    try {
      f = parseFault(JSON.parse(body || '{}'));
    } catch (e) {
      return send(res, 400, JSON.stringify({ error: (e as Error).message }));
    }
    // Answer before a crash takes the listener (and this socket) down.
    send(res, 200, JSON.stringify({ ok: true, fault: f }));
    if (f.kind === 'crash') res.on('finish', () => setImmediate(() => deps.fault(f)));
    else deps.fault(f);
    return;
  }
  if (path === '/sim/fault' && req.method === 'DELETE') {
    const kind = new URL(req.url ?? '/', 'http://x').searchParams.get('kind') ?? undefined;
    deps.clearFaults(kind as FaultKind | undefined);
    return send(res, 200, JSON.stringify({ ok: true }));
  }
  sendError(res, errors.notFound());
}

/** /v1/responses/{id} and /v1/responses/{id}/cancel: vLLM's retrieve and cancel routes. */
const STORED = /^\/v1\/responses\/([^/]+)(\/cancel)?$/;

function storedResponse(deps: RouteDeps, res: ServerResponse, method: string, id: string, cancel: string | undefined): void {
  if (method !== (cancel ? 'POST' : 'GET')) return sendError(res, errors.methodNotAllowed());
  const r = deps.gen.responses.get(id);
  if (r === undefined) return sendError(res, errors.responseNotFound(id));
  // Every stored response here ran in the foreground: vLLM cancels only background ones.
  if (cancel) return sendError(res, errors.cannotCancel());
  send(res, 200, r.body);
}

export function createRequestHandler(deps: RouteDeps): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    const path = (req.url ?? '/').split('?', 1)[0];
    const method = req.method ?? 'GET';
    const run = async (): Promise<void> => {
      if (path.startsWith('/sim/')) return admin(deps, req, res, path);
      const parse = PARSERS[path];
      if (parse !== undefined) {
        if (method !== 'POST') return sendError(res, errors.methodNotAllowed());
        return generation(deps, req, res, parse, path);
      }
      if (path === '/v1/messages/count_tokens') {
        if (method !== 'POST') return sendError(res, errors.methodNotAllowed());
        return messagesCountTokens(deps, req, res);
      }
      if (path === '/tokenize' && method === 'POST') return tokenize(deps, req, res);
      if (method === 'POST' && deps.gen.lora.route(path, await readBody(req), res, sendError)) return;
      req.resume();
      const stored = STORED.exec(path);
      if (stored !== null) return storedResponse(deps, res, method, stored[1], stored[2]);
      if (method !== 'GET') return sendError(res, errors.methodNotAllowed());
      if (path === '/health') {
        if (deps.gen.faults.get('unhealthy')) return send(res, 503, '', 'text/plain');
        // A stalled server stalls its health check too, without using up a `times` count.
        if (deps.gen.faults.get('stall')) return hold(deps, res);
        return send(res, 200, '', 'text/plain');
      }
      if (path === '/v1/models') return send(res, 200, modelsBody(deps));
      if (path === '/metrics') return send(res, 200, deps.metricsText(), 'text/plain; version=0.0.4; charset=utf-8');
      if (path === '/version') return send(res, 200, JSON.stringify({ version: '0.25.1' }));
      sendError(res, errors.notFound());
    };
    run().catch((e: unknown) => {
      if (!res.headersSent) send(res, 500, JSON.stringify({ error: String(e) }));
      else res.destroy();
    });
  };
}
