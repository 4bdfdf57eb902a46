// `warmroute probe --traces`: each timed request carries a traceparent of its own; after the run,
// each trace is read back from Jaeger's query API and split into the gateway's part (its SERVER
// span: TTFT, own hops, route) and the replica's (vLLM's llm_request: queue, prefill, decode, TTFT).

import { randomBytes } from 'node:crypto';

import { A } from '../telemetry/tracing/attributes.js';
import { fetchTrace, type JaegerSpan, type JaegerTrace } from './jaeger.js';

export interface ProbeTraceContext {
  traceId: string;
  /** The probe's own span id: the parent it names in the traceparent (the probe exports no span). */
  spanId: string;
  traceparent: string;
}

/** A new trace per request, sampled (flags 01), so every traced hop records it. */
export function newTraceContext(): ProbeTraceContext {
  const traceId = randomBytes(16).toString('hex');
  const spanId = randomBytes(8).toString('hex');
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-01` };
}

/** vLLM's llm_request span and the attributes read from it (vllm/tracing/utils.py). */
export const LLM_REQUEST_SPAN = 'llm_request';
const V = {
  ttft: 'gen_ai.latency.time_to_first_token',
  queue: 'gen_ai.latency.time_in_queue',
  prefill: 'gen_ai.latency.time_in_model_prefill',
  decode: 'gen_ai.latency.time_in_model_decode',
} as const;

/** The gateway's hops in the order they tile its SERVER span (its events). */
export const GATEWAY_HOPS = ['parse', 'route', 'queue', 'connect', 'upstream_headers', 'upstream_first_token', 'stream'] as const;

export interface GatewayPart {
  /** gen_ai.response.time_to_first_chunk. */
  ttftMs: number | null;
  /** warmroute.overhead_ms: parse + route + queue + connect. */
  ownMs: number | null;
  /** Each hop event's warmroute.hop.duration_ms. */
  hopsMs: Partial<Record<(typeof GATEWAY_HOPS)[number], number>>;
  replica: string | null;
  route: string | null;
  cachedTokens: number | null;
  predictedCachedTokens: number | null;
  attempts: number | null;
}

export interface ReplicaPart {
  service: string;
  ttftMs: number | null;
  queueMs: number | null;
  prefillMs: number | null;
  decodeMs: number | null;
}

export interface TraceBreakdown {
  traceId: string;
  gateway: GatewayPart | null;
  replica: ReplicaPart | null;
  /**
   * Gateway TTFT − the replica's TTFT − the gateway's own hops: the time between the two that
   * neither counts, before the replica's clock starts (frontMs) and after it stops (backMs).
   */
  betweenMs: number | null;
  /**
   * The request written to the replica (the gateway's upstream_headers event) → llm_request's start
   * (vLLM's arrival_time, taken when its OpenAI server starts rendering the chat): the network, the
   * replica's HTTP server and request validation. Both are span times on the epoch: one host's clock, or
   * hosts whose clocks agree.
   */
  frontMs: number | null;
  /** betweenMs − frontMs: the first output's way back (detokenized, framed as SSE, read by the gateway). */
  backMs: number | null;
}

const tag = (s: JaegerSpan, key: string): unknown => s.tags.find((t) => t.key === key)?.value;
const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : typeof v === 'string' && v.trim() !== '' && Number.isFinite(Number(v)) ? Number(v) : null);
const secToMs = (v: unknown): number | null => { const n = num(v); return n === null ? null : n * 1000; };
const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);
const parentOf = (s: JaegerSpan) => s.references.find((r) => r.refType === 'CHILD_OF')?.spanID ?? null;

/** The gateway's SERVER span: the one carrying warmroute's outcome. */
function gatewaySpan(t: JaegerTrace): JaegerSpan | undefined {
  return t.spans.find((s) => tag(s, A.outcome) !== undefined && s.operationName !== LLM_REQUEST_SPAN);
}

function gatewayPart(s: JaegerSpan): GatewayPart {
  const hopsMs: GatewayPart['hopsMs'] = {};
  for (const log of s.logs) {
    const name = log.fields.find((f) => f.key === 'event')?.value;
    const d = num(log.fields.find((f) => f.key === A.hopMs)?.value);
    if (d !== null && (GATEWAY_HOPS as readonly unknown[]).includes(name)) hopsMs[name as (typeof GATEWAY_HOPS)[number]] = d;
  }
  return {
    ttftMs: secToMs(tag(s, A.timeToFirstChunk)),
    ownMs: num(tag(s, A.overheadMs)),
    hopsMs,
    replica: str(tag(s, A.replica)),
    route: str(tag(s, A.routeReason)),
    cachedTokens: num(tag(s, A.cacheReadTokens)),
    predictedCachedTokens: num(tag(s, A.predictedCached)),
    attempts: num(tag(s, A.attempts)),
  };
}

export function breakdown(t: JaegerTrace): TraceBreakdown {
  const gw = gatewaySpan(t);
  // Several llm_request spans (a failover that reached a replica, a resume): the last one answered.
  const llm = t.spans.filter((s) => s.operationName === LLM_REQUEST_SPAN).sort((a, b) => a.startTime - b.startTime).at(-1);
  const gateway = gw ? gatewayPart(gw) : null;
  const replica: ReplicaPart | null = llm ? {
    service: t.processes[llm.processID]?.serviceName ?? '?',
    ttftMs: secToMs(tag(llm, V.ttft)),
    queueMs: secToMs(tag(llm, V.queue)),
    prefillMs: secToMs(tag(llm, V.prefill)),
    decodeMs: secToMs(tag(llm, V.decode)),
  } : null;
  const betweenMs = gateway?.ttftMs != null && replica?.ttftMs != null && gateway.ownMs !== null
    ? gateway.ttftMs - replica.ttftMs - gateway.ownMs : null;
  // The last attempt's request written: the upstream_headers event is at that mark (one per exchange).
  const sentUs = gw?.logs.find((l) => l.fields.some((f) => f.key === 'event' && f.value === 'upstream_headers'))?.timestamp;
  const frontMs = llm && sentUs !== undefined && betweenMs !== null ? (llm.startTime - sentUs) / 1000 : null;
  return { traceId: t.traceID, gateway, replica, betweenMs, frontMs, backMs: frontMs === null ? null : betweenMs! - frontMs };
}

/**
 * Every span the trace will get has arrived: the replica's llm_request, and the gateway's SERVER
 * span unless the request went straight to the replica (llm_request's parent is the probe's span).
 */
function complete(t: JaegerTrace | null, ctx: ProbeTraceContext): boolean {
  if (!t) return false;
  const llm = t.spans.find((s) => s.operationName === LLM_REQUEST_SPAN);
  if (!llm) return false;
  return parentOf(llm) === ctx.spanId || gatewaySpan(t) !== undefined;
}

/**
 * Reads each trace until all are complete or `waitMs` has passed (exporters batch their spans: 5 s
 * by the SDKs' default), and returns what arrived: a trace the query API never had is absent.
 */
export async function readTraces(queryUrl: string, contexts: readonly ProbeTraceContext[], waitMs: number, timeoutMs: number): Promise<Map<string, TraceBreakdown>> {
  const got = new Map<string, JaegerTrace>();
  const pending = new Set(contexts);
  const deadline = Date.now() + waitMs;
  for (;;) {
    for (const ctx of [...pending]) {
      const t = await fetchTrace(queryUrl, ctx.traceId, timeoutMs).catch(() => null);
      if (t) got.set(ctx.traceId, t);
      if (complete(t, ctx)) pending.delete(ctx);
    }
    if (pending.size === 0 || Date.now() >= deadline) break;
    await new Promise((r) => setTimeout(r, Math.min(500, Math.max(0, deadline - Date.now()))));
  }
  return new Map([...got].map(([id, t]) => [id, breakdown(t)]));
}
