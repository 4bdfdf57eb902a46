/** How an upstream attempt failed, and what the forwarder does about it. */

/** The client went away: abort the upstream, answer nobody. */
export class ClientGone extends Error {}

/** The replica answered 502/503 before any byte: worth trying the next one. */
export class RetryStatus extends Error {
  constructor(readonly status: number) { super(`replica answered ${status}`); }
}

/**
 * The replica answered 404 for a managed adapter (adapters.sources) routed there as loaded: it no
 * longer has it (another gateway unloaded it, or the replica restarted). Loaded there again and
 * the request sent again, once.
 */
export class AdapterGone extends Error {
  constructor(readonly replica: string, readonly adapter: string) { super(`replica ${replica} answered 404: adapter ${adapter} is not loaded there`); }
}

/** Every cause an attempt can fail with (the `cause` label of the retry and stream-error counters). */
export const FAILURE_CAUSES = ['connect', 'connect_timeout', 'reset', 'status_502', 'status_503', 'headers_timeout', 'idle_timeout', 'malformed_response', 'queue_full', 'adapter_gone', 'other'] as const;

export interface Failure {
  /** Bounded: a metric label. */
  readonly cause: string;
  /** Before any response byte: try the next-ranked replica. */
  readonly retry: boolean;
  /** The replica could not be reached at all: a connect failure for outlier detection (fleet/outlier.ts). */
  readonly down: boolean;
}

// Codes from node's sockets and from undici.
const UNREACHABLE = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);
// A connection that was reached and then lost: retried elsewhere, but one loss does not condemn a
// replica. UND_ERR_SOCKET includes a reset in the middle of a close-delimited body (agent.ts).
const DROPPED = new Set(['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED']);
// What undici's parser (llhttp) refuses: ambiguous or broken framing, a body that does not match
// its Content-Length. Never forwarded.
const MALFORMED = new Set(['UND_ERR_RES_CONTENT_LENGTH_MISMATCH', 'UND_ERR_RES_EXCEEDED_MAX_SIZE', 'UND_ERR_HEADERS_OVERFLOW']);

function codeOf(err: Error): string {
  return (err as { code?: string }).code ?? '';
}

export function failureOf(err: Error): Failure {
  if (err instanceof RetryStatus) return { cause: `status_${err.status}`, retry: true, down: false };
  if (err instanceof AdapterGone) return { cause: 'adapter_gone', retry: true, down: false };
  const code = codeOf(err);
  if (UNREACHABLE.has(code)) return { cause: 'connect', retry: true, down: true };
  if (code === 'UND_ERR_CONNECT_TIMEOUT') return { cause: 'connect_timeout', retry: true, down: true };
  if (DROPPED.has(code)) return { cause: 'reset', retry: true, down: false };
  if (code === 'UND_ERR_HEADERS_TIMEOUT') return { cause: 'headers_timeout', retry: false, down: false };
  if (code === 'UND_ERR_BODY_TIMEOUT') return { cause: 'idle_timeout', retry: false, down: false };
  if (MALFORMED.has(code) || err.name === 'HTTPParserError') return { cause: 'malformed_response', retry: true, down: false };
  return { cause: 'other', retry: false, down: false };
}
