// Jaeger's query API, the part `warmroute probe --traces` reads: GET /api/traces/{traceId}, whose
// JSON (spans with microsecond times, tags, logs for span events, processes for services) every
// Jaeger serves, v1 and v2 alike.

import { request } from 'undici';

export interface JaegerTag { key: string; type: string; value: unknown }
export interface JaegerSpan {
  traceID: string;
  spanID: string;
  operationName: string;
  references: { refType: string; traceID: string; spanID: string }[];
  /** Microseconds since the epoch. */
  startTime: number;
  /** Microseconds. */
  duration: number;
  tags: JaegerTag[];
  /** The span's events: the event's name is the field `event`. */
  logs: { timestamp: number; fields: JaegerTag[] }[];
  processID: string;
}
export interface JaegerTrace { traceID: string; spans: JaegerSpan[]; processes: Record<string, { serviceName: string }> }

export class TracesUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TracesUnavailableError';
  }
}

const base = (queryUrl: string) => queryUrl.replace(/\/+$/, '');

/** GET /api/services: fails before a run that could not read its traces. */
export async function checkQueryApi(queryUrl: string, timeoutMs: number): Promise<void> {
  try {
    const res = await request(`${base(queryUrl)}/api/services`, { signal: AbortSignal.timeout(timeoutMs) });
    await res.body.dump();
    if (res.statusCode !== 200) throw new TracesUnavailableError(`${queryUrl}/api/services answered HTTP ${res.statusCode}: not Jaeger's query API?`);
  } catch (err) {
    if (err instanceof TracesUnavailableError) throw err;
    throw new TracesUnavailableError(`cannot read traces from ${queryUrl}: ${err instanceof Error ? err.message : String(err)}`);
  }
}

/** The trace, or null while Jaeger does not know it (404) or answers with something else. */
export async function fetchTrace(queryUrl: string, traceId: string, timeoutMs: number): Promise<JaegerTrace | null> {
  const res = await request(`${base(queryUrl)}/api/traces/${traceId}`, { signal: AbortSignal.timeout(timeoutMs) });
  if (res.statusCode !== 200) {
    await res.body.dump();
    return null;
  }
  const body = (await res.body.json()) as { data?: JaegerTrace[] | null };
  return body.data?.[0] ?? null;
}
