/** How an upstream attempt failed, and what the forwarder does about it. */

/** The client went away: abort the upstream, answer nobody. */
export class ClientGone extends Error {}

/** The replica answered 502/503 before any byte: worth trying the next one. */
export class RetryStatus extends Error {
  constructor(readonly status: number) { super(`replica answered ${status}`); }
}

// Codes from node's sockets, from the forwarder's upstream client (WR_*), and from undici (the
// health probes' client).
// Errors that mean the replica could not be reached at all: it is marked down.
const UNREACHABLE = new Set(['ECONNREFUSED', 'WR_CONNECT_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);
const CONNECT_TIMEOUT = new Set(['WR_CONNECT_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT']);
// Errors of a connection that was reached: retried elsewhere, but one reset does not condemn a replica.
export const DROPPED = new Set(['ECONNRESET', 'EPIPE', 'WR_SOCKET_CLOSED', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED']);
const HEADERS_TIMEOUT = new Set(['WR_HEADERS_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT']);

export function causeOf(err: Error): { cause: string; retry: boolean; down: boolean } {
  if (err instanceof RetryStatus) return { cause: `status_${err.status}`, retry: true, down: false };
  const code = (err as { code?: string }).code ?? '';
  if (UNREACHABLE.has(code)) return { cause: CONNECT_TIMEOUT.has(code) ? 'connect_timeout' : 'connect', retry: true, down: true };
  if (DROPPED.has(code)) return { cause: 'reset', retry: true, down: false };
  if (HEADERS_TIMEOUT.has(code)) return { cause: 'headers_timeout', retry: false, down: false };
  return { cause: 'other', retry: false, down: false };
}

