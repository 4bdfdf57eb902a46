import type { IncomingMessage } from 'node:http';

// RFC 9110 §7.6.1 hop-by-hop headers, plus the ones each side's HTTP client sets itself: Host and
// framing (Content-Length, Transfer-Encoding) for the request undici writes, framing for the
// response node:http writes, Expect (undici does not send 100-continue requests).
const HOP_BY_HOP = new Set([
  'connection', 'keep-alive', 'proxy-authenticate', 'proxy-authorization', 'proxy-connection',
  'te', 'trailer', 'trailers', 'transfer-encoding', 'upgrade', 'expect', 'host', 'content-length',
]);

/** Headers named in a Connection header are hop-by-hop too. */
function connectionTokens(value: string | string[] | undefined): Set<string> | null {
  if (!value) return null;
  const s = new Set<string>();
  for (const t of String(value).split(',')) {
    const v = t.trim().toLowerCase();
    if (v && v !== 'close' && v !== 'keep-alive') s.add(v);
  }
  return s.size ? s : null;
}

/**
 * Request headers for the replica, as a flat [name, value, ...] list taken from the client's raw
 * headers (no object built). The replica's own api key, when configured, replaces the client's
 * Authorization and x-api-key (Anthropic's SDKs send their key there), which are dropped anyway when
 * the gateway checks client keys (either may hold one);
 * x-forwarded-for gets the client address appended. `trace` (tracing on): the attempt's own
 * traceparent/tracestate, which replace the client's so the replica's span is the attempt's child.
 */
export function upstreamRequestHeaders(req: IncomingMessage, apiKey: string | undefined, dropAuthorization = false, trace: readonly string[] | null = null): string[] {
  const raw = req.rawHeaders;
  const extra = connectionTokens(req.headers.connection);
  const out: string[] = [];
  let xff: string | null = null;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i].toLowerCase();
    if (HOP_BY_HOP.has(name) || extra?.has(name)) continue;
    if (name === 'x-forwarded-for') { xff = xff ? `${xff}, ${raw[i + 1]}` : raw[i + 1]; continue; }
    if ((name === 'authorization' || name === 'x-api-key') && (apiKey !== undefined || dropAuthorization)) continue;
    if (trace !== null && (name === 'traceparent' || name === 'tracestate')) continue;
    out.push(raw[i], raw[i + 1]);
  }
  const client = req.socket.remoteAddress ?? 'unknown';
  out.push('x-forwarded-for', xff ? `${xff}, ${client}` : client);
  if (apiKey !== undefined) out.push('authorization', `Bearer ${apiKey}`);
  if (trace !== null) for (const v of trace) out.push(v);
  return out;
}

export interface ClientHeaders {
  /** Flat [name, value, ...] for ServerResponse.writeHead. */
  readonly headers: string[];
  readonly contentType: string;
  /** The replica framed the body by length: node:http will too, so a short body cannot be patched. */
  readonly contentLength: string | null;
}

/**
 * Response headers for the client from the replica's (as undici parsed them: lower-case names,
 * repeated ones as arrays), hop-by-hop ones removed. Content-Length is kept out of the list: the
 * forwarder decides (stream/) whether to pass it on.
 */
export function clientResponseHeaders(upstream: Record<string, string | string[] | undefined>): ClientHeaders {
  const extra = connectionTokens(upstream.connection);
  const out: string[] = [];
  for (const name in upstream) {
    if (HOP_BY_HOP.has(name) || extra?.has(name)) continue;
    const v = upstream[name];
    if (v === undefined) continue;
    if (typeof v === 'string') out.push(name, v);
    else for (const one of v) out.push(name, one);
  }
  const ct = upstream['content-type'];
  const cl = upstream['content-length'];
  return { headers: out, contentType: typeof ct === 'string' ? ct : '', contentLength: typeof cl === 'string' ? cl : null };
}
