// One probed endpoint: its URLs, its single keep-alive connection, and warm-up.

import { Client } from 'undici';

export interface EndpointAddress {
  /** As the user gave it, for display. */
  baseUrl: string;
  origin: string;
  hostname: string;
  port: number;
  chatPath: string;
  modelsPath: string;
}

export class ProbeConnectionError extends Error {
  constructor(
    message: string,
    readonly code: string,
  ) {
    super(message);
    this.name = 'ProbeConnectionError';
  }
}

/**
 * Accepts `http://host:8000`, `http://host:8000/v1`, a trailing slash, a path prefix
 * (`https://gw/openai/v1`) or even the full `/v1/chat/completions` URL; the query string is kept
 * for providers that version their API through it.
 */
export function resolveBaseUrl(raw: string): EndpointAddress {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new TypeError(`not a valid URL: ${raw}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new TypeError(`URL must be http:// or https://: ${raw}`);
  }
  let path = url.pathname.replace(/\/+$/, '').replace(/\/chat\/completions$/, '');
  if (!path.endsWith('/v1')) path += '/v1';
  const port = url.port ? Number(url.port) : url.protocol === 'https:' ? 443 : 80;
  return {
    baseUrl: raw,
    origin: url.origin,
    hostname: url.hostname.replace(/^\[(.*)\]$/, '$1'),
    port,
    chatPath: `${path}/chat/completions${url.search}`,
    modelsPath: `${path}/models${url.search}`,
  };
}

export interface Endpoint {
  label: string;
  address: EndpointAddress;
  client: Client;
  /** TCP connections the client has opened so far; 1 means every request shared the warm one. */
  connections(): number;
  close(): Promise<void>;
}

export function openEndpoint(label: string, address: EndpointAddress): Endpoint {
  // A Client is exactly one connection with pipelining 1: requests run one after another on the
  // same socket. Long keep-alive so a slow case does not let the warm connection lapse; a server
  // hint (Keep-Alive: timeout=N) still takes precedence.
  const client = new Client(address.origin, {
    pipelining: 1,
    keepAliveTimeout: 60_000,
    keepAliveMaxTimeout: 600_000,
  });
  let connections = 0;
  client.on('connect', () => {
    connections++;
  });
  return {
    label,
    address,
    client,
    connections: () => connections,
    async close() {
      await client.close().catch(() => client.destroy());
    },
  };
}

/** GET /v1/models to open the connection before the first timed request; any status will do. */
export async function warmUp(ep: Endpoint, headers: Record<string, string>, timeoutMs: number): Promise<number> {
  try {
    const res = await ep.client.request({
      method: 'GET',
      path: ep.address.modelsPath,
      headers,
      signal: AbortSignal.timeout(timeoutMs),
    });
    await res.body.dump();
    return res.statusCode;
  } catch (err) {
    throw asConnectionError(ep.address, err) ?? err;
  }
}

const CONNECT_CODES: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'host lookup failed',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  UND_ERR_CONNECT_TIMEOUT: 'connect timed out',
};

/** Maps a failure to open a connection onto a ProbeConnectionError; null for anything else. */
export function asConnectionError(address: EndpointAddress, err: unknown): ProbeConnectionError | null {
  const code = findCode(err);
  if (!code || !(code in CONNECT_CODES)) return null;
  const target = `${address.hostname}:${address.port}`;
  return new ProbeConnectionError(`cannot connect to ${address.origin} (${target}): ${CONNECT_CODES[code]} [${code}]`, code);
}

// Node wraps happy-eyeballs failures in an AggregateError and undici sometimes puts the socket
// error in `cause`, so look a couple of levels down.
function findCode(err: unknown, depth = 0): string | undefined {
  if (!err || typeof err !== 'object' || depth > 3) return undefined;
  const e = err as { code?: unknown; cause?: unknown; errors?: unknown };
  if (typeof e.code === 'string' && e.code in CONNECT_CODES) return e.code;
  for (const inner of Array.isArray(e.errors) ? e.errors : []) {
    const c = findCode(inner, depth + 1);
    if (c) return c;
  }
  return findCode(e.cause, depth + 1) ?? (typeof e.code === 'string' ? e.code : undefined);
}
