/** A realtime client of the gateway: a `ws` connection that records what it receives, or the refused upgrade's status. */
import { connect } from 'node:net';
import WebSocket from 'ws';

export interface Client {
  ws: WebSocket;
  /** Every message received, with its binary flag, in order. */
  got: [Buffer, boolean][];
  closed: Promise<{ code: number; reason: string; at: number }>;
}

/**
 * Opens a realtime connection through the gateway (`protocols`: the subprotocols offered, as a
 * browser's `new WebSocket(url, protocols)` does); rejects with the HTTP status of a refused upgrade.
 */
export function dial(g: { url: string }, opts: { query?: string; headers?: Record<string, string>; path?: string; protocols?: string[] } = {}): Promise<Client> {
  const ws = new WebSocket(`${g.url.replace(/^http/, 'ws')}${opts.path ?? '/v1/realtime'}${opts.query ?? ''}`, opts.protocols ?? [], { headers: opts.headers });
  const got: [Buffer, boolean][] = [];
  ws.on('message', (d: Buffer, isBinary) => got.push([d, isBinary]));
  const closed = new Promise<{ code: number; reason: string; at: number }>((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: reason.toString(), at: performance.now() })));
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve({ ws, got, closed }));
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c: Buffer) => { body += c.toString(); });
      res.on('end', () => reject(Object.assign(new Error(`HTTP ${res.statusCode}: ${body}`), { status: res.statusCode, body })));
    });
    ws.once('error', (e) => reject(e));
  });
}

/** The status and body of an upgrade the gateway refused; throws when it was accepted. */
export async function refusedWith(p: Promise<Client>): Promise<{ status: number; body: any }> {
  try {
    const c = await p;
    c.ws.close();
    throw new Error('accepted');
  } catch (e) {
    const x = e as { status?: number; body?: string };
    if (x.status === undefined) throw e;
    return { status: x.status, body: JSON.parse(x.body ?? '{}') };
  }
}

/** Writes `text` on a fresh connection and reads until the gateway closes it (or `untilMs` passes). */
export function rawExchange(url: string, text: string, untilMs = 0): Promise<string> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    let out = '';
    const s = connect(Number(u.port), u.hostname, () => s.write(text));
    const timer = untilMs > 0 ? setTimeout(() => s.destroy(), untilMs) : null;
    s.on('data', (d) => { out += d.toString(); });
    s.on('close', () => { if (timer) clearTimeout(timer); resolve(out); });
    s.on('error', reject);
  });
}
