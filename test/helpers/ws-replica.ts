/**
 * A fake realtime replica: /health, /v1/models and /metrics answered like vLLM's, and WebSocket
 * upgrades on /v1/realtime handed to `connect` (by default: session.created, then every message
 * echoed back as it came, text as text, binary as binary). Tests swap `connect` or `upgrade` to make
 * it misbehave, and `choose` to select another subprotocol (or none, as vLLM does).
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import WebSocket, { WebSocketServer } from 'ws';

export interface WsReplica {
  url: string;
  /** Connections accepted so far (every one, closed or not). */
  readonly sockets: WebSocket[];
  /** The upgrade requests received, in order. */
  readonly upgrades: IncomingMessage[];
  /** What a new connection does; `echo` by default. */
  connect: (ws: WebSocket, req: IncomingMessage) => void;
  /** Takes the raw upgrade instead (answer with a status, say); null: accept it and call `connect`. */
  upgrade: ((req: IncomingMessage, socket: Duplex) => void) | null;
  /** The subprotocol it selects among those offered (false: none); the first offered by default, as `ws` does. */
  choose: (offered: Set<string>) => string | false;
  open(): number;
  close(): Promise<void>;
}

export const sessionCreated = () => JSON.stringify({ type: 'session.created', id: `sess-${Math.random().toString(16).slice(2)}`, created: Math.floor(Date.now() / 1000) });

/** session.created, then every message sent back as it came. */
export function echo(ws: WebSocket): void {
  ws.send(sessionCreated());
  ws.on('message', (data, isBinary) => ws.send(data as Buffer, { binary: isBinary }));
}

export async function startWsReplica(model = 'fixture-model'): Promise<WsReplica> {
  const models = JSON.stringify({ object: 'list', data: [{ id: model, object: 'model', owned_by: 'vllm' }] });
  const server: Server = createServer((req, res) => {
    if (req.url === '/v1/models') { res.writeHead(200, { 'content-type': 'application/json' }); res.end(models); return; }
    res.writeHead(req.url === '/health' || req.url === '/metrics' ? 200 : 404);
    res.end();
  });
  const wss = new WebSocketServer({ noServer: true, handleProtocols: (offered) => self.choose(offered) });
  const self: WsReplica = {
    url: '',
    sockets: [],
    upgrades: [],
    connect: echo,
    upgrade: null,
    choose: (offered) => offered.values().next().value ?? false,
    open: () => self.sockets.filter((s) => s.readyState === WebSocket.OPEN).length,
    close: async () => {
      for (const s of self.sockets) s.terminate();
      wss.close();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    self.upgrades.push(req);
    socket.on('error', () => {});
    if (self.upgrade !== null) return self.upgrade(req, socket);
    wss.handleUpgrade(req, socket, head, (ws) => {
      self.sockets.push(ws);
      ws.on('error', () => {});
      self.connect(ws, req);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  self.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return self;
}
