// Every byte the gateway sends to a replica goes through this undici Agent: forwarded requests,
// health probes, /metrics scrapes and /v1/models. One keep-alive Pool per replica origin.

import { readFileSync } from 'node:fs';
import { Agent, buildConnector, Pool } from 'undici';
import type { UpstreamConfig } from '../config/schema.js';

/** TLS settings of one https replica, files already read. */
export interface ReplicaTls {
  readonly ca?: Buffer;
  readonly servername?: string;
}

export interface UpstreamAgentOptions {
  /** TCP connect and, for https replicas, the TLS handshake. */
  connectTimeoutMs: number;
  /** TLS settings of the https replicas that have any, by origin (`https://host:port`). */
  tlsByOrigin?: ReadonlyMap<string, ReplicaTls>;
}

/**
 * An idle connection is kept 4 s: below uvicorn's 5 s default (vLLM's server), so the replica
 * rarely closes one just as a request is written on it; a `keep-alive: timeout=N` hint from the
 * replica shortens it further (undici reads it).
 */
const KEEP_ALIVE_MS = 4_000;

/**
 * undici ends a close-delimited response body that a replica aborted with a TCP reset as if the
 * body were complete (its client takes an ECONNRESET there as macOS's way of closing). For a proxy
 * a reset mid-body is a loss: relayed as complete, the client would take a truncated answer for a
 * whole one. This listener runs before undici's own and gives the reset the code of undici's
 * generic socket error, which undici then reports as a failure. Responses framed by length or by
 * chunks are unaffected: undici already fails those when they end early.
 */
function resetIsAFailure(err: NodeJS.ErrnoException): void {
  if (err.code === 'ECONNRESET') err.code = 'UND_ERR_SOCKET';
}

function connectorFor(origin: string, opts: UpstreamAgentOptions): buildConnector.connector {
  const tls = opts.tlsByOrigin?.get(origin);
  const base = buildConnector({
    timeout: opts.connectTimeoutMs,
    ...(tls?.ca ? { ca: tls.ca } : {}),
    ...(tls?.servername ? { servername: tls.servername } : {}),
  });
  return (options, callback) => base(options, (...args) => {
    if (args[1]) args[1].prependListener('error', resetIsAFailure);
    callback(...args);
  });
}

export function createUpstreamAgent(opts: UpstreamAgentOptions): Agent {
  return new Agent({
    factory: (origin, poolOpts) => {
      const key = new URL(String(origin)).origin;
      return new Pool(origin, { ...(poolOpts as Pool.Options), connect: connectorFor(key, opts) });
    },
    keepAliveTimeout: KEEP_ALIVE_MS,
    keepAliveMaxTimeout: 600_000,
    connections: null,
    pipelining: 1,
  });
}

/** TLS settings of the replicas in a configuration that have any, by origin; CA files are read here. */
export function tlsByOrigin(upstreams: readonly UpstreamConfig[]): Map<string, ReplicaTls> {
  const out = new Map<string, ReplicaTls>();
  for (const u of upstreams) {
    if (!u.tls) continue;
    out.set(new URL(u.url).origin, { ca: u.tls.caFile ? readFileSync(u.tls.caFile) : undefined, servername: u.tls.servername });
  }
  return out;
}
