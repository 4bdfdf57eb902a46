import type { IncomingHttpHeaders } from 'node:http';
import { errors } from '../errors.js';
import type { QueuePlace } from './limiter.js';

export const PRIORITY_CLASSES = ['interactive', 'batch'] as const;
export type PriorityClass = (typeof PRIORITY_CLASSES)[number];

/** Where a request's class came from (a log field). */
export type PrioritySource = 'key' | 'header' | 'body' | 'default';

export interface PriorityOptions {
  /** Class of a request with a session key that names none. */
  readonly sessionDefault: PriorityClass;
  /** Class of a request without a session key that names none. */
  readonly keylessDefault: PriorityClass;
  /** TTFT deadline of a request that names none (x-slo-ttft-ms), by class; 0: none. */
  readonly interactiveSloMs: number;
  readonly batchSloMs: number;
  /** An interactive request whose deadline passes while it queues is answered late (true) or refused then (false). */
  readonly answerLate: boolean;
  /** The replicas run --scheduling-policy priority: the class reaches them as the body's `priority`. */
  readonly vllm: { readonly enabled: boolean; readonly interactive: number; readonly batch: number };
}

/** A request's class, its place in the gateway's queues, and what vLLM is told. */
export interface Priority extends QueuePlace {
  readonly cls: PriorityClass;
  readonly source: PrioritySource;
  /** The `priority` to add to the body (vllm.enabled, and the client set none); null: the body is left alone. */
  readonly inject: number | null;
}

const INTEGER = /^-?\d{1,9}$/;
const MAX_SLO_MS = 3_600_000;

/** vLLM's priority: lower runs first, 0 is its default. At or under 0 is interactive. */
const classOfNumber = (n: number): PriorityClass => (n > 0 ? 'batch' : 'interactive');

function headerOf(headers: IncomingHttpHeaders, name: string): string | null {
  const v = headers[name];
  if (v === undefined) return null;
  return (Array.isArray(v) ? v[0] : v).trim();
}

/**
 * A request's class, in order: its API key's configured class; the `x-priority` header
 * (`interactive`, `batch`, or an integer passed to vLLM as is); the body's `priority` (vLLM's own
 * field); the default for requests with or without a session key. Its deadline: `x-slo-ttft-ms`,
 * else its class's default. A malformed header is a 400.
 */
export function priorityOf(x: {
  keyClass: PriorityClass | null;
  headers: IncomingHttpHeaders;
  body: Record<string, unknown> | null;
  hasSession: boolean;
  arrivedAt: number;
  options: PriorityOptions;
}): Priority {
  const o = x.options;
  const header = headerOf(x.headers, 'x-priority');
  let headerNumber: number | null = null;
  let headerClass: PriorityClass | null = null;
  if (header !== null) {
    if (header === 'interactive' || header === 'batch') headerClass = header;
    else if (INTEGER.test(header)) { headerNumber = Number(header); headerClass = classOfNumber(headerNumber); }
    else throw errors.invalidRequest(['x-priority must be interactive, batch or an integer'], 'x-priority');
  }
  const bodyPriority = x.body !== null && typeof x.body.priority === 'number' && Number.isInteger(x.body.priority) ? x.body.priority : null;
  let cls: PriorityClass;
  let source: PrioritySource;
  if (x.keyClass !== null) { cls = x.keyClass; source = 'key'; }
  else if (headerClass !== null) { cls = headerClass; source = 'header'; }
  else if (bodyPriority !== null) { cls = classOfNumber(bodyPriority); source = 'body'; }
  else { cls = x.hasSession ? o.sessionDefault : o.keylessDefault; source = 'default'; }

  const slo = headerOf(x.headers, 'x-slo-ttft-ms');
  let budgetMs = cls === 'batch' ? o.batchSloMs : o.interactiveSloMs;
  if (slo !== null) {
    const n = Number(slo);
    if (!INTEGER.test(slo) || n < 1 || n > MAX_SLO_MS) throw errors.invalidRequest([`x-slo-ttft-ms must be an integer from 1 to ${MAX_SLO_MS}`], 'x-slo-ttft-ms');
    budgetMs = n;
  }
  // The client's own priority field is never overwritten; a body that is not JSON has none to add.
  const inject = !o.vllm.enabled || x.body === null || x.body.priority !== undefined ? null : headerNumber ?? o.vllm[cls];
  return {
    cls,
    source,
    batch: cls === 'batch',
    deadline: budgetMs > 0 ? x.arrivedAt + budgetMs : Infinity,
    budgetMs,
    expireAtDeadline: !o.answerLate,
    inject,
  };
}
