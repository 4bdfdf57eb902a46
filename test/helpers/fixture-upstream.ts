/**
 * A small vLLM-like upstream for gateway tests whose behaviour each request controls through
 * headers (which the gateway forwards untouched):
 *   x-fixture-chunks: content chunks to send (default 3)
 *   x-fixture-gap-ms: delay before each content chunk (default 0)
 *   x-fixture-die-after: destroy the socket after this many content chunks
 *   x-fixture-status: answer with this status and an error body instead
 *   x-fixture-read-delay-ms: leave the request body unread this long (a busy replica)
 *   x-fixture-hold: a name; a stream stops before its content chunk number x-fixture-hold-after
 *     (default 0: right after the role chunk) until the test calls release(name), so a test can
 *     keep a request open exactly as long as it needs instead of guessing how long is enough. After
 *     HOLD_LIMIT_MS it goes on by itself: a gateway that mishandles a held request then fails the
 *     test's assertions instead of hanging it.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface SeenRequest {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: Buffer;
}

export interface FixtureUpstream {
  name: string;
  url: string;
  port: number;
  seen: SeenRequest[];
  /** performance.now() of each request whose client went away before the response ended. */
  aborts: number[];
  /**
   * Lets the streams held under `name` (x-fixture-hold) go on; later ones under that name are not
   * held. False if they had already gone on (HOLD_LIMIT_MS passed, or released before).
   */
  release(name: string): boolean;
  close(): Promise<void>;
}

const MODEL = 'fixture-model';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const HOLD_LIMIT_MS = 10_000;

interface Gate { opened: Promise<void>; release(): boolean }

function gate(): Gate {
  let open = () => {};
  let isOpen = false;
  const opened = new Promise<void>((r) => { open = r; });
  const release = () => {
    clearTimeout(limit);
    if (isOpen) return false;
    isOpen = true;
    open();
    return true;
  };
  const limit = setTimeout(release, HOLD_LIMIT_MS);
  limit.unref();
  return { opened, release };
}

function chunk(id: string, delta: object, finish: string | null = null): string {
  return `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: 1, model: MODEL, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] })}\n\n`;
}

async function completions(req: IncomingMessage, res: ServerResponse, body: Buffer, self: FixtureUpstream, held: (name: string) => Promise<void>) {
  const h = req.headers;
  const status = Number(h['x-fixture-status'] ?? 200);
  if (status !== 200) {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: { message: `fixture status ${status}`, type: 'ServiceUnavailableError', param: null, code: status } }));
    return;
  }
  const parsed = JSON.parse(body.toString()) as { stream?: boolean; stream_options?: { include_usage?: boolean } };
  const n = Number(h['x-fixture-chunks'] ?? 3);
  const gap = Number(h['x-fixture-gap-ms'] ?? 0);
  const dieAfter = h['x-fixture-die-after'] === undefined ? -1 : Number(h['x-fixture-die-after']);
  const hold = h['x-fixture-hold'] === undefined ? null : String(h['x-fixture-hold']);
  const holdAfter = Number(h['x-fixture-hold-after'] ?? 0);
  const promptTokens = Math.ceil(body.length / 4);
  if (!parsed.stream) {
    await sleep(gap);
    res.writeHead(200, { 'content-type': 'application/json', 'x-fixture-name': self.name });
    res.end(JSON.stringify({ id: 'cmpl-1', object: 'chat.completion', model: MODEL, choices: [{ index: 0, message: { role: 'assistant', content: 'hello '.repeat(n) }, finish_reason: 'stop' }], usage: { prompt_tokens: promptTokens, completion_tokens: n, total_tokens: promptTokens + n, prompt_tokens_details: { cached_tokens: 16 } } }));
    return;
  }
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', 'x-fixture-name': self.name });
  res.write(chunk('c1', { role: 'assistant', content: '' }));
  for (let i = 0; i < n; i++) {
    if (hold !== null && i === holdAfter) await held(hold);
    if (gap) await sleep(gap);
    if (res.destroyed) return;
    if (i === dieAfter) { res.socket?.destroy(); return; }
    res.write(chunk('c1', { content: `tok${i} ` }));
  }
  res.write(chunk('c1', {}, 'stop'));
  if (parsed.stream_options?.include_usage) {
    res.write(`data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: MODEL, choices: [], usage: { prompt_tokens: promptTokens, total_tokens: promptTokens + n, completion_tokens: n, prompt_tokens_details: { cached_tokens: 32 } } })}\n\n`);
  }
  res.end('data: [DONE]\n\n');
}

export async function startFixture(name = 'fixture'): Promise<FixtureUpstream> {
  const gates = new Map<string, Gate>();
  const gateOf = (g: string) => gates.get(g) ?? gates.set(g, gate()).get(g)!;
  const held = (g: string) => gateOf(g).opened;
  const self: FixtureUpstream = { name, url: '', port: 0, seen: [], aborts: [], release: (g) => gateOf(g).release(), close: async () => {} };
  const server = createServer((req, res) => {
    const parts: Buffer[] = [];
    const readDelay = Number(req.headers['x-fixture-read-delay-ms'] ?? 0);
    if (readDelay > 0) {
      // Paused before a data listener exists, so adding one does not start the flow.
      req.pause();
      setTimeout(() => req.resume(), readDelay);
    }
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      const body = Buffer.concat(parts);
      self.seen.push({ method: req.method!, url: req.url!, headers: req.headers, body });
      res.on('close', () => { if (!res.writableFinished) self.aborts.push(performance.now()); });
      if (req.url === '/health') { res.end(); return; }
      if (req.url === '/v1/models') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ object: 'list', data: [{ id: MODEL, object: 'model', owned_by: 'vllm' }] }));
        return;
      }
      if (req.url === '/metrics') {
        res.end(`vllm:num_requests_waiting{model_name="${MODEL}"} 0.0\nvllm:num_requests_running{model_name="${MODEL}"} 0.0\nvllm:kv_cache_usage_perc{model_name="${MODEL}"} 0.1\n`);
        return;
      }
      if (req.url === '/v1/chat/completions' || req.url === '/v1/completions') {
        completions(req, res, body, self, held).catch(() => res.destroy());
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ echo: req.url, bytes: body.length }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  self.port = (server.address() as AddressInfo).port;
  self.url = `http://127.0.0.1:${self.port}`;
  self.close = async () => {
    for (const g of gates.values()) g.release();
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  };
  return self;
}

export const FIXTURE_MODEL = MODEL;

/** The last completion request the fixture saw since index `from` (health probes and scrapes land in `seen` too). */
export function lastCompletion(f: FixtureUpstream, from = 0): SeenRequest {
  const r = f.seen.slice(from).filter((s) => s.url.endsWith('/completions')).at(-1);
  if (!r) throw new Error('no completion request reached the fixture');
  return r;
}
