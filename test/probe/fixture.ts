// A tiny OpenAI-style streaming upstream for probe tests: it lets a test decide, per request, when
// the first content chunk goes out, what status and usage to return, and it records every
// request with the socket that carried it.

import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createTcpServer, type AddressInfo, type Socket } from 'node:net';

export interface Behavior {
  status?: number;
  /** Body for a non-2xx status. */
  errorBody?: string;
  /** Delay between the role chunk (sent with the headers) and the first content chunk. */
  firstContentDelayMs?: number;
  /** Send the first content as a tool call instead of text. */
  toolCall?: boolean;
  /** Send an error event instead of content. */
  streamError?: string;
  /** Never send content and keep the stream open (for timeouts). */
  hang?: boolean;
  /** Finish the stream normally but without any content chunk. */
  noContent?: boolean;
  promptTokens?: number;
  /** null: omit prompt_tokens_details, as vLLM does without --enable-prompt-tokens-details. */
  cachedTokens?: number | null;
}

export interface RecordedRequest {
  label: string;
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: string;
  socket: number;
}

export interface Fixture {
  url: string;
  port: number;
  requests: RecordedRequest[];
  chatRequests(): RecordedRequest[];
  /** Sockets that carried at least one HTTP request (bare TCP probes excluded). */
  requestSockets(): number;
  close(): Promise<void>;
}

export interface FixtureOptions {
  label?: string;
  /** Shared across fixtures to observe the interleaving of requests. */
  log?: RecordedRequest[];
  /** Called with the 0-based index of the chat request. */
  behave?: (index: number, req: RecordedRequest) => Behavior;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export async function startFixture(opts: FixtureOptions = {}): Promise<Fixture> {
  const label = opts.label ?? 'A';
  const requests: RecordedRequest[] = [];
  const socketIds = new WeakMap<Socket, number>();
  let nextSocket = 0;
  let chatIndex = 0;

  const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    let id = socketIds.get(req.socket);
    if (id === undefined) socketIds.set(req.socket, (id = ++nextSocket));
    const rec: RecordedRequest = {
      label,
      method: req.method ?? '',
      path: req.url ?? '',
      headers: req.headers,
      body: Buffer.concat(chunks).toString('utf8'),
      socket: id,
    };
    requests.push(rec);
    opts.log?.push(rec);

    if (req.method === 'GET' && rec.path.endsWith('/models')) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ object: 'list', data: [{ id: 'm', object: 'model' }] }));
      return;
    }
    const b = opts.behave?.(chatIndex++, rec) ?? {};
    await respond(res, rec, b);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    chatRequests: () => requests.filter((r) => r.method === 'POST'),
    requestSockets: () => new Set(requests.map((r) => r.socket)).size,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

async function respond(res: ServerResponse, rec: RecordedRequest, b: Behavior): Promise<void> {
  const status = b.status ?? 200;
  if (status < 200 || status > 299) {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(b.errorBody ?? JSON.stringify({ error: { message: 'fixture failure', type: 'server_error', code: null } }));
    return;
  }
  const base = { id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 0, model: 'm' };
  const send = (obj: unknown): void => {
    res.write(`data: ${JSON.stringify(obj)}\n\n`);
  };
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  // Headers and the role-only chunk go out at once: a probe that stopped the clock here would
  // report near zero.
  send({ ...base, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }], usage: null });
  if (b.hang) return; // the client's timeout ends it
  await sleep(b.firstContentDelayMs ?? 0);
  if (b.streamError) {
    send({ error: { message: b.streamError, type: 'server_error', code: null } });
    res.end('data: [DONE]\n\n');
    return;
  }
  if (b.noContent) {
    res.end('data: [DONE]\n\n');
    return;
  }
  const first = b.toolCall
    ? { tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'confirm', arguments: '' } }] }
    : { content: 'Ready' };
  send({ ...base, choices: [{ index: 0, delta: first, finish_reason: null }], usage: null });
  send({ ...base, choices: [{ index: 0, delta: { content: '.' }, finish_reason: 'stop' }], usage: null });
  const promptTokens = b.promptTokens ?? Math.round(rec.body.length / 4);
  const usage: Record<string, unknown> = { prompt_tokens: promptTokens, completion_tokens: 2, total_tokens: promptTokens + 2 };
  if (b.cachedTokens !== null) usage.prompt_tokens_details = { cached_tokens: b.cachedTokens ?? 0 };
  send({ ...base, choices: [], usage });
  res.end('data: [DONE]\n\n');
}

/** A loopback port with nothing listening on it. */
export async function closedPort(): Promise<number> {
  const s = createTcpServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}
