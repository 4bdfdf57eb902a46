/**
 * A replica that writes its responses as raw bytes, for tests of what a misbehaving replica can
 * send: ambiguous framing, bodies cut by a reset, answers that never come. It reads requests with
 * a minimal HTTP/1.1 parser (Content-Length bodies only, which is all the gateway sends) and
 * answers /health, /v1/models and /metrics itself; everything else goes to `answer`.
 */
import { createServer, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';

export interface RawRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: Buffer;
  /** How many requests this connection carried before this one. */
  before: number;
  socket: Socket;
}

export interface RawReplica {
  url: string;
  port: number;
  /** Every request other than the probes, in arrival order. */
  requests: RawRequest[];
  close(): Promise<void>;
}

const MODELS = '{"object":"list","data":[{"id":"fixture-model","object":"model","owned_by":"vllm"}]}';

export function rawResponse(status: number, headers: [string, string][], body = ''): string {
  return `HTTP/1.1 ${status} X\r\n${headers.map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n${body}`;
}

function probeAnswer(path: string): string | null {
  if (path === '/health') return rawResponse(200, [['content-length', '0']]);
  if (path === '/v1/models') return rawResponse(200, [['content-type', 'application/json'], ['content-length', String(MODELS.length)]], MODELS);
  if (path === '/metrics') return rawResponse(200, [['content-length', '0']]);
  // The gateway's token-ratio probe: answered like a server without the endpoint, not counted.
  if (path === '/tokenize') return rawResponse(404, [['content-length', '0']]);
  return null;
}

/** `answer` writes the response (or not) on `req.socket`; it may close or reset it. */
export async function startRawReplica(answer: (req: RawRequest) => void): Promise<RawReplica> {
  const sockets = new Set<Socket>();
  const self: RawReplica = { url: '', port: 0, requests: [], close: async () => {} };
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    let buf = Buffer.alloc(0);
    let served = 0;
    socket.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      for (;;) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        const lines = buf.subarray(0, end).toString('latin1').split('\r\n');
        const [method, path] = lines[0].split(' ');
        const headers: Record<string, string> = {};
        for (const l of lines.slice(1)) {
          const c = l.indexOf(':');
          headers[l.slice(0, c).trim().toLowerCase()] = l.slice(c + 1).trim();
        }
        const length = Number(headers['content-length'] ?? 0);
        if (buf.length < end + 4 + length) return;
        const body = buf.subarray(end + 4, end + 4 + length);
        buf = buf.subarray(end + 4 + length);
        const req: RawRequest = { method, path, headers, body, before: served++, socket };
        const probe = probeAnswer(path);
        if (probe !== null) socket.write(probe);
        else {
          self.requests.push(req);
          answer(req);
        }
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  self.port = (server.address() as AddressInfo).port;
  self.url = `http://127.0.0.1:${self.port}`;
  self.close = async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((r) => server.close(() => r()));
  };
  return self;
}

/** An OpenAI-style SSE event. */
export const sse = (obj: object) => `data: ${JSON.stringify(obj)}\n\n`;
export const contentEvent = (text: string) => sse({ id: 'c1', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: text }, finish_reason: null }] });

/**
 * Streams `event` as a chunked SSE response as fast as the peer takes it, at most `max` times
 * (so a gateway that never ends the exchange fails its test instead of hanging it).
 */
export function floodEvents(s: Socket, event: string, max = 4096): void {
  s.write('HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n');
  let sent = 0;
  const pump = () => {
    while (!s.destroyed && sent < max) {
      sent++;
      if (!s.write(`${Buffer.byteLength(event).toString(16)}\r\n${event}\r\n`)) return void s.once('drain', pump);
    }
  };
  pump();
}
