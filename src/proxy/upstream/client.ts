// The connections to the replicas for forwarded requests: keep-alive HTTP/1.1 over plain sockets,
// one request per connection at a time, the request head and body leaving in one writev, the
// response framed by response-parser.ts and its body handed on as the socket delivered it.
//
// Why not undici here: in the same overhead run a bare node:http proxy forwarding over raw
// sockets added 0.37 ms to TTFT at concurrency 1 where the same proxy over undici added 0.47 ms
// (0.65 vs 1.02 ms with the targets interleaved); see docs/design-notes.md. undici still serves
// the gateway's own calls (health probes, /metrics scrapes, /v1/models), which are off the hot path.

import { isIP, connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect, type ConnectionOptions } from 'node:tls';
import { createResponseParser, type ResponseHead, type ResponseParser } from './response-parser.js';

export interface UpstreamRequest {
  /** `http://host:port` or `https://host:port`. */
  origin: string;
  path: string;
  method: string;
  /** Flat name, value pairs; Host and Content-Length are the client's to set. */
  headers: string[];
  body: Buffer | null;
  /** Request written → response head, ms. */
  headersTimeout: number;
  /** Longest silence between two reads of the body, ms. */
  bodyTimeout: number;
}

/** The forwarder's side of one exchange. Exactly one of onComplete / onError ends it. */
export interface UpstreamHandler {
  /** At once, before anything is sent: `abort` ends the exchange with that error. */
  onConnect(abort: (err: Error) => void): void;
  /** Head and body written to a connected socket (the kernel may still be taking a large body). */
  onRequestSent(): void;
  /** Return false after aborting; `resume` restarts reading after onData returned false. */
  onHeaders(status: number, headers: string[], resume: () => void): boolean;
  /** Return false to stop reading until `resume` is called (the client is slower). */
  onData(chunk: Buffer): boolean;
  /** Around the handling of one socket read: what it writes can leave in one syscall. */
  onReadStart?(): void;
  onReadEnd?(): void;
  onComplete(): void;
  onError(err: Error): void;
}

export interface UpstreamClient {
  dispatch(req: UpstreamRequest, handler: UpstreamHandler): void;
  /** Idle connections closed now, busy ones once their response is over. */
  close(): Promise<void>;
  /** Open connections per origin: busy and idle. */
  connections(): Record<string, { busy: number; idle: number }>;
}

export interface UpstreamClientOptions {
  connectTimeoutMs: number;
  /**
   * How long an idle connection is kept. Below the replicas' own keep-alive timeout (uvicorn's,
   * which vLLM uses, defaults to 5 s), so the replica rarely closes one just as a request is
   * written on it; a `keep-alive: timeout=N` hint shortens it further.
   */
  keepAliveMs?: number;
  maxHeadBytes?: number;
  /** For https replicas: extra TLS options (a private CA, client certificates). */
  tls?: Omit<ConnectionOptions, 'host' | 'port' | 'servername' | 'ALPNProtocols'>;
  /** A reused connection that closed before any response byte was retried once on a new one. */
  onStaleRetry?(origin: string): void;
}

export class UpstreamError extends Error {
  constructor(message: string, readonly code: string) { super(message); }
}

interface Origin {
  readonly key: string;
  readonly host: string;
  readonly port: number;
  readonly tls: boolean;
  /** `host: ...\r\n`, encoded once. */
  readonly hostLine: string;
  readonly idle: Conn[];
  busy: number;
}

/** One socket and the exchange currently on it. */
interface Conn {
  readonly socket: Socket;
  readonly origin: Origin;
  exchange: Exchange | null;
  /** Connected and has carried at least one exchange. */
  reused: boolean;
  keepAliveMs: number;
  lastError: Error | null;
}

interface Exchange {
  data(buf: Buffer): void;
  closed(err: Error | null): void;
  timeout(): void;
}

const DEFAULT_KEEPALIVE_MS = 4_000;

export function createUpstreamClient(opts: UpstreamClientOptions): UpstreamClient {
  const origins = new Map<string, Origin>();
  const keepAliveMs = opts.keepAliveMs ?? DEFAULT_KEEPALIVE_MS;
  const maxHeadBytes = opts.maxHeadBytes ?? 64 * 1024;
  let closing = false;
  let closedAll: (() => void) | null = null;

  function originOf(key: string): Origin {
    let o = origins.get(key);
    if (o === undefined) {
      const u = new URL(key);
      const tls = u.protocol === 'https:';
      const port = u.port ? Number(u.port) : tls ? 443 : 80;
      o = { key, host: u.hostname.replace(/^\[|\]$/g, ''), port, tls, hostLine: `host: ${u.host}\r\n`, idle: [], busy: 0 };
      origins.set(key, o);
    }
    return o;
  }

  function openConn(o: Origin): Conn {
    const socket: Socket = o.tls
      ? tlsConnect({ ...opts.tls, host: o.host, port: o.port, ...(isIP(o.host) ? {} : { servername: o.host }), ALPNProtocols: ['http/1.1'] })
      : netConnect({ host: o.host, port: o.port });
    socket.setNoDelay(true);
    socket.setKeepAlive(true, 60_000);
    const conn: Conn = { socket, origin: o, exchange: null, reused: false, keepAliveMs, lastError: null };
    socket.on('data', (buf: Buffer) => {
      if (conn.exchange) conn.exchange.data(buf);
      else socket.destroy(); // bytes on an idle connection: nothing may follow, drop it
    });
    socket.on('error', (e) => { conn.lastError = e; });
    socket.on('timeout', () => {
      if (conn.exchange) conn.exchange.timeout();
      else socket.destroy();
    });
    socket.on('close', () => {
      const i = o.idle.indexOf(conn);
      if (i >= 0) o.idle.splice(i, 1);
      const ex = conn.exchange;
      conn.exchange = null;
      ex?.closed(conn.lastError);
      maybeAllClosed();
    });
    return conn;
  }

  function takeIdle(o: Origin): Conn | null {
    while (o.idle.length > 0) {
      const c = o.idle.pop()!;
      if (!c.socket.destroyed && c.socket.writable) return c;
    }
    return null;
  }

  function release(conn: Conn, reusable: boolean) {
    conn.exchange = null;
    conn.origin.busy--;
    if (!reusable || closing || conn.socket.destroyed) {
      conn.socket.destroy();
      maybeAllClosed();
      return;
    }
    conn.reused = true;
    // A slow client may have left it paused just before the response ended.
    if (conn.socket.isPaused()) conn.socket.resume();
    conn.socket.setTimeout(conn.keepAliveMs);
    conn.origin.idle.push(conn);
  }

  function maybeAllClosed() {
    if (closedAll === null) return;
    for (const o of origins.values()) if (o.busy > 0) return;
    const done = closedAll;
    closedAll = null;
    done();
  }

  function dispatch(request: UpstreamRequest, handler: UpstreamHandler) {
    const o = originOf(request.origin);
    // What the exchange reaches, dropped when it ends. The forwarder keeps `abort` and `resume`
    // (closures of this call) as long as its response lives, and whatever they reach survives
    // young-generation collections with them: holding on to the handler here meant 2 MB promoted
    // per scavenge at concurrency 50 and scavenges 2–4× longer (10 ms instead of 3), measured
    // with --trace-gc-nvp.
    let req: UpstreamRequest | null = request;
    let h: UpstreamHandler | null = handler;
    let conn: Conn | null = null;
    let finished = false;
    let staleRetried = false;
    let parser: ResponseParser | null = null;
    let gotBytes = false;
    let keepAlive = false;
    let hintMs: number | null = null;

    function end(err: Error | null) {
      if (finished) return;
      finished = true;
      const c = conn;
      conn = null;
      if (c) release(c, err === null && keepAlive && !parser!.trailing);
      const hh = drop();
      if (err) hh.onError(err);
      else hh.onComplete();
    }

    function drop(): UpstreamHandler {
      const hh = h!;
      h = null;
      req = null;
      parser = null;
      return hh;
    }

    const abort = (err: Error) => {
      if (finished) return;
      keepAlive = false;
      conn?.socket.destroy();
      end(err);
    };
    handler.onConnect(abort);
    if (finished) return;
    if (closing) return end(new UpstreamError('upstream client is closed', 'WR_CLIENT_CLOSED'));

    const exchange: Exchange = {
      data(buf) {
        gotBytes = true;
        const hh = h!;
        hh.onReadStart?.();
        try {
          parser!.execute(buf);
        } catch (e) {
          keepAlive = false;
          conn?.socket.destroy();
          end(e as Error);
        } finally {
          hh.onReadEnd?.();
        }
      },
      closed(err) {
        if (finished) return;
        if (!gotBytes && conn?.reused && !staleRetried) {
          // The replica closed an idle connection as we wrote on it: nothing was read, so the
          // request never started there. Once, on a new connection.
          staleRetried = true;
          o.busy--;
          opts.onStaleRetry?.(o.key);
          start(null);
          return;
        }
        conn = null;
        o.busy--;
        if (parser!.eof()) return; // a body delimited by the close: complete
        end(err && (err as { code?: string }).code
          ? err
          : new UpstreamError(gotBytes ? 'replica closed the connection mid-response' : 'replica closed the connection', 'WR_SOCKET_CLOSED'));
      },
      timeout() {
        if (finished) return;
        const err = !conn!.socket.connecting && !conn!.socket.pending
          ? parser!.started
            ? new UpstreamError(`no data from the replica for ${req!.bodyTimeout} ms`, 'WR_BODY_TIMEOUT')
            : new UpstreamError(`no response head from the replica within ${req!.headersTimeout} ms`, 'WR_HEADERS_TIMEOUT')
          : new UpstreamError(`connect to ${o.host}:${o.port} timed out after ${opts.connectTimeoutMs} ms`, 'WR_CONNECT_TIMEOUT');
        keepAlive = false;
        conn!.socket.destroy();
        end(err);
      },
    };

    function start(reuse: Conn | null) {
      const c = reuse ?? openConn(o);
      conn = c;
      o.busy++;
      c.exchange = exchange;
      c.lastError = null;
      gotBytes = false;
      parser = createResponseParser({
        onHead(head: ResponseHead) {
          if (finished) return false;
          keepAlive = head.keepAlive;
          if (head.keepAliveHintS !== null) hintMs = Math.max(0, head.keepAliveHintS * 1000 - 1000);
          c.socket.setTimeout(req!.bodyTimeout);
          return h!.onHeaders(head.status, head.headers, resume) && !finished;
        },
        onBody(chunk) {
          if (finished) return false;
          if (!h!.onData(chunk)) {
            // The client is the slow side: its silence is not the replica's.
            c.socket.setTimeout(0);
            c.socket.pause();
          }
          return !finished;
        },
        onEnd() {
          if (hintMs !== null) c.keepAliveMs = Math.min(c.keepAliveMs, hintMs);
          end(null);
        },
      }, { maxHeadBytes, noBody: req!.method === 'HEAD' });
      write(c);
      // "Sent" is when the request is handed to a connected socket, not when the kernel has taken
      // all of it: a body larger than the socket buffer goes out as fast as the replica reads,
      // and that wait is the replica's time (upstream_*), not the gateway's (connect).
      if (!c.socket.connecting) return sent(c);
      c.socket.setTimeout(opts.connectTimeoutMs);
      c.socket.once(o.tls ? 'secureConnect' : 'connect', () => { if (conn === c && !finished) sent(c); });
    }

    function sent(c: Conn) {
      c.socket.setTimeout(req!.headersTimeout);
      h!.onRequestSent();
    }

    function resume() {
      if (finished || conn === null) return;
      conn.socket.setTimeout(req!.bodyTimeout);
      conn.socket.resume();
    }

    function write(c: Conn) {
      const r = req!;
      let head = `${r.method} ${r.path} HTTP/1.1\r\n${o.hostLine}`;
      const hs = r.headers;
      for (let i = 0; i < hs.length; i += 2) head += `${hs[i]}: ${hs[i + 1]}\r\n`;
      const body = r.body;
      if (body !== null || r.method === 'POST' || r.method === 'PUT' || r.method === 'PATCH') head += `content-length: ${body?.length ?? 0}\r\n`;
      head += '\r\n';
      if (body !== null && body.length > 0) {
        c.socket.cork();
        c.socket.write(head, 'latin1');
        c.socket.write(body);
        c.socket.uncork();
      } else {
        c.socket.write(head, 'latin1');
      }
    }

    start(takeIdle(o));
  }

  return {
    dispatch,
    async close() {
      closing = true;
      for (const o of origins.values()) for (const c of o.idle.splice(0)) c.socket.destroy();
      let busy = 0;
      for (const o of origins.values()) busy += o.busy;
      if (busy === 0) return;
      await new Promise<void>((r) => { closedAll = r; });
    },
    connections() {
      const out: Record<string, { busy: number; idle: number }> = {};
      for (const o of origins.values()) out[o.key] = { busy: o.busy, idle: o.idle.length };
      return out;
    },
  };
}
