import type { IncomingMessage } from 'node:http';

// RFC 9110 §7.6.1 hop-by-hop headers, plus ones a proxy must set itself.
const HOP_BY_HOP = new Set([
  'connection', 'keep-alive', 'proxy-authenticate', 'proxy-authorization', 'proxy-connection',
  'te', 'trailer', 'trailers', 'transfer-encoding', 'upgrade', 'expect', 'host',
]);
// Framing the forwarder sets itself for the bytes it sends.
const REQUEST_FRAMING = new Set(['content-length']);

/** Headers named in a Connection header are hop-by-hop too. */
function connectionTokens(value: string | undefined): Set<string> | null {
  if (!value) return null;
  const s = new Set<string>();
  for (const t of value.split(',')) {
    const v = t.trim().toLowerCase();
    if (v && v !== 'close' && v !== 'keep-alive') s.add(v);
  }
  return s.size ? s : null;
}

/**
 * Request headers for the replica, as a flat [name, value, ...] list taken from the client's raw
 * headers (no object built). The replica's own api key, when configured, replaces the client's
 * Authorization; x-forwarded-for gets the client address appended.
 */
export function upstreamRequestHeaders(req: IncomingMessage, apiKey: string | undefined): string[] {
  const raw = req.rawHeaders;
  const extra = connectionTokens(req.headers.connection);
  const out: string[] = [];
  let xff: string | null = null;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i].toLowerCase();
    if (HOP_BY_HOP.has(name) || REQUEST_FRAMING.has(name) || extra?.has(name)) continue;
    if (name === 'x-forwarded-for') { xff = xff ? `${xff}, ${raw[i + 1]}` : raw[i + 1]; continue; }
    if (name === 'authorization' && apiKey !== undefined) continue;
    out.push(raw[i], raw[i + 1]);
  }
  const client = req.socket.remoteAddress ?? 'unknown';
  out.push('x-forwarded-for', xff ? `${xff}, ${client}` : client);
  if (apiKey !== undefined) out.push('authorization', `Bearer ${apiKey}`);
  return out;
}

/** Response headers for the client from the replica's flat name, value list, hop-by-hop ones removed. */
export function clientResponseHeaders(raw: readonly string[]): { headers: string[]; contentType: string } {
  const out: string[] = [];
  let contentType = '';
  let extra: Set<string> | null = null;
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i].length === 10 && raw[i].toLowerCase() === 'connection') extra = connectionTokens(raw[i + 1]);
  }
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i];
    const lower = name.toLowerCase();
    if (HOP_BY_HOP.has(lower) || extra?.has(lower)) continue;
    if (lower === 'content-type') contentType = raw[i + 1];
    out.push(name, raw[i + 1]);
  }
  return { headers: out, contentType };
}
