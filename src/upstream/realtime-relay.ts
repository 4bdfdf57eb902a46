// A realtime connection's upstream half (the `ws` library does every frame): opening a WebSocket to
// a replica and reading its session.created, then the relay of frames both ways, as they are, in
// order, with back-pressure, pings and pongs and close codes passed on.

import { createRequire } from 'node:module';
import WebSocket from 'ws';
import { eventType } from '../stream/realtime-tap.js';

/**
 * Whether `ws` masks and unmasks frames in native code: it loads the optional `bufferutil` addon
 * when it can, and silently does it in JavaScript when it cannot (a platform with no prebuilt
 * addon and no compiler), which costs the relay ~5 µs more per 900-byte audio frame
 * (docs/design-notes.md). The gateway says so once at start instead.
 */
export function nativeMasking(): boolean {
  if (process.env.WS_NO_BUFFER_UTIL) return false;
  try {
    createRequire(import.meta.url)('bufferutil');
    return true;
  } catch {
    return false;
  }
}

/** Why a replica failed a connection before its session.created (a bounded metric label). */
export type OpenFailure = 'connect' | 'status' | 'timeout' | 'closed' | 'protocol';
export const OPEN_FAILURES: readonly OpenFailure[] = ['connect', 'status', 'timeout', 'closed', 'protocol'];

/** A replica's socket whose session.created came: the frames read since, kept for the relay. */
export interface OpenedUpstream {
  readonly ws: WebSocket;
  /** The subprotocol the replica selected among those offered; '' for none. */
  readonly protocol: string;
  /** session.created, then anything that came before the relay took over (in order). */
  readonly pending: [Buffer, boolean][];
  /** Stops keeping frames and hands them over (the relay's listeners take over). */
  release(): [Buffer, boolean][];
}

export type OpenResult = { readonly ok: true; readonly up: OpenedUpstream } | { readonly ok: false; readonly cause: OpenFailure; readonly detail: string };

export interface OpenOptions {
  readonly url: string;
  /** The subprotocols offered, as valid distinct tokens. */
  readonly protocols: readonly string[];
  readonly headers: Record<string, string>;
  readonly maxFrameBytes: number;
  /** Connect and session.created within this. */
  readonly timeoutMs: number;
  /** An https replica's private CA and the name to verify (upstreams' `tls`). */
  readonly tls?: { readonly ca?: Buffer; readonly servername?: string };
}

/**
 * Opens a WebSocket to a replica and waits for its first message, which must be session.created
 * (vLLM speaks first). `cancel` gives up (the client left meanwhile): the socket is dropped.
 *
 * The subprotocols are offered in the Sec-WebSocket-Protocol header rather than handed to `ws`:
 * `ws` refuses a server that selects none of the protocols it was given, which RFC 6455 allows and
 * vLLM does. The replica's selection is checked here instead (one it was offered, or none), then
 * taken out of the response before `ws` reads it, since `ws` refuses a selection it did not offer.
 */
export function openUpstream(o: OpenOptions): { result: Promise<OpenResult>; cancel(): void } {
  const offered = new Set(o.protocols);
  const headers = offered.size === 0 ? o.headers : { ...o.headers, 'sec-websocket-protocol': o.protocols.join(', ') };
  const ws = new WebSocket(o.url, { headers, maxPayload: o.maxFrameBytes, perMessageDeflate: false, autoPong: false, handshakeTimeout: o.timeoutMs, followRedirects: false, skipUTF8Validation: true, ...(o.tls?.ca ? { ca: o.tls.ca } : {}), ...(o.tls?.servername ? { servername: o.tls.servername } : {}) });
  const pending: [Buffer, boolean][] = [];
  let selected = '';
  let settle!: (r: OpenResult) => void;
  let settled = false;
  const result = new Promise<OpenResult>((resolve) => { settle = resolve; });
  const timer = setTimeout(() => fail('timeout', `no session.created within ${o.timeoutMs} ms`), o.timeoutMs);
  function fail(cause: OpenFailure, detail: string) {
    if (settled) return;
    settled = true;
    clearTimeout(timer);
    ws.removeAllListeners('message');
    ws.on('error', () => {});
    ws.terminate();
    settle({ ok: false, cause, detail });
  }
  const keep = (data: Buffer, isBinary: boolean) => {
    if (!settled) {
      if (isBinary || eventType(data) !== 'session.created') return fail('protocol', 'its first message was not session.created');
      settled = true;
      clearTimeout(timer);
      pending.push([data, isBinary]);
      settle({ ok: true, up: { ws, protocol: selected, pending, release() { ws.off('message', keep); return pending.splice(0); } } });
      return;
    }
    pending.push([data, isBinary]);
  };
  ws.on('message', keep);
  // Emitted before `ws` checks the response; closing the socket here ends the handshake.
  ws.once('upgrade', (res) => {
    const protocol = res.headers['sec-websocket-protocol'];
    if (protocol === undefined) return;
    delete res.headers['sec-websocket-protocol'];
    if (!offered.has(protocol)) return fail('protocol', 'it selected a subprotocol it was not offered');
    selected = protocol;
  });
  ws.on('unexpected-response', (req, res) => {
    const status = res.statusCode ?? 0;
    res.resume();
    req.destroy();
    fail('status', `answered the upgrade with HTTP ${status}`);
  });
  ws.on('error', (e: Error) => fail(/handshake has timed out/i.test(e.message) ? 'timeout' : 'connect', e.message));
  ws.on('close', (code) => fail('closed', `closed (${code}) before session.created`));
  return { result, cancel: () => fail('closed', 'cancelled') };
}

/** Close codes a peer may be sent (RFC 6455 §7.4; 1005 and 1006 only describe a close). */
export function sendableCode(code: number): boolean {
  return (code >= 1000 && code <= 1014 && code !== 1004 && code !== 1005 && code !== 1006) || (code >= 3000 && code <= 4999);
}

/** A close reason within the 123 bytes a close frame holds. */
export function closeReason(text: string): string {
  if (Buffer.byteLength(text) <= 123) return text;
  let s = text.slice(0, 123);
  while (Buffer.byteLength(s) > 120) s = s.slice(0, -1);
  return `${s}...`;
}

/** Above this many bytes waiting to go to one side, the other side is not read until they went. */
const HIGH_WATER = 1024 * 1024;

export interface RelaySide {
  /** A message read from this side (before it is passed on). */
  message(data: Buffer, isBinary: boolean): void;
  /** Any frame read from this side, pings and pongs included. */
  activity(): void;
}

/**
 * Passes every message, ping and pong from `from` to `to` unchanged (text stays text, binary stays
 * binary, in order). When `to` cannot take more, `from` is paused until what waits has gone.
 */
export function pipe(from: WebSocket, to: WebSocket, side: RelaySide): void {
  let paused = false;
  const resume = () => { paused = false; from.resume(); };
  from.on('message', (data: Buffer, isBinary: boolean) => {
    side.activity();
    side.message(data, isBinary);
    if (to.readyState !== WebSocket.OPEN) return;
    if (!paused && to.bufferedAmount + data.length > HIGH_WATER) {
      paused = true;
      from.pause();
      to.send(data, { binary: isBinary }, resume);
      return;
    }
    to.send(data, { binary: isBinary });
  });
  from.on('ping', (data: Buffer) => {
    side.activity();
    if (to.readyState === WebSocket.OPEN) to.ping(data);
  });
  from.on('pong', (data: Buffer) => {
    side.activity();
    if (to.readyState === WebSocket.OPEN) to.pong(data);
  });
}
