// vLLM's `--otlp-traces-endpoint`, simulated: one SERVER span named `llm_request` per finished
// request, parented by the request's W3C `traceparent`, with the attributes vLLM's output processor
// sets (vllm/v1/engine/output_processor.py, do_tracing): its latencies in seconds, measured on the
// engine's own marks. Like vLLM's, the span starts when the request reaches the engine (after the
// API server's frontend) and ends when it finishes; aborted requests get none. Exported as OTLP
// http/json with the OpenTelemetry SDK, batched.

import { ROOT_CONTEXT, SpanKind } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import type { Seq } from './sequence.js';

/** What the span carries besides the engine's marks. */
export interface TracedRequest {
  requestId: string;
  maxTokens: number;
  /** The request's `traceparent` / `tracestate`; none: a trace of its own, as vLLM starts. */
  headers: { traceparent?: string | string[]; tracestate?: string | string[] };
}

export interface SimTracer {
  /** The engine scheduled the sequence for the first time (the end of its queue time). */
  scheduled(seq: Seq): void;
  /** The sequence finished (not aborted): its span, from its engine arrival to now. */
  finished(seq: Seq, req: TracedRequest): void;
  shutdown(): Promise<void>;
}

/** vLLM's span attribute names (vllm/tracing/utils.py, SpanAttributes). */
export const LLM_REQUEST = {
  span: 'llm_request',
  ttft: 'gen_ai.latency.time_to_first_token',
  e2e: 'gen_ai.latency.e2e',
  queue: 'gen_ai.latency.time_in_queue',
  prefill: 'gen_ai.latency.time_in_model_prefill',
  decode: 'gen_ai.latency.time_in_model_decode',
  inference: 'gen_ai.latency.time_in_model_inference',
  promptTokens: 'gen_ai.usage.prompt_tokens',
  completionTokens: 'gen_ai.usage.completion_tokens',
  requestId: 'gen_ai.request.id',
  maxTokens: 'gen_ai.request.max_tokens',
} as const;

const propagator = new W3CTraceContextPropagator();
const getter = {
  keys: (h: TracedRequest['headers']) => Object.keys(h),
  get: (h: TracedRequest['headers'], k: string) => h[k as keyof TracedRequest['headers']],
};
/** The engine's marks are performance.now() readings; spans want the epoch. */
const epochMs = (mark: number) => performance.timeOrigin + mark;

/**
 * `serviceName`: vLLM's comes from OTEL_SERVICE_NAME; the sim's is `vllm` and the replica's name
 * goes in `service.instance.id`. Exports every 100 ms (vLLM: the SDK's 5 s), so a test or the
 * demo reads a trace soon after its request.
 */
export function createSimTracer(endpoint: string, replica: string, serviceName = 'vllm'): SimTracer {
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ 'service.name': serviceName, 'service.instance.id': replica }),
    spanProcessors: [new BatchSpanProcessor({ exporter: new OTLPTraceExporter({ url: endpoint }), scheduledDelayMillis: 100 })],
  });
  const tracer = provider.getTracer('vllm-sim');
  const scheduledAt = new WeakMap<Seq, number>();
  return {
    scheduled(seq) {
      if (!scheduledAt.has(seq)) scheduledAt.set(seq, performance.now());
    },
    finished(seq, req) {
      const now = performance.now();
      const arrival = seq.engineArrivalMs;
      const scheduled = scheduledAt.get(seq) ?? arrival;
      const first = seq.firstTokenMs || now;
      const s = (ms: number) => ms / 1000;
      const parent = req.headers.traceparent === undefined ? ROOT_CONTEXT : propagator.extract(ROOT_CONTEXT, req.headers, getter);
      tracer.startSpan(LLM_REQUEST.span, {
        kind: SpanKind.SERVER,
        startTime: epochMs(arrival),
        attributes: {
          [LLM_REQUEST.ttft]: s(first - arrival),
          [LLM_REQUEST.e2e]: s(now - arrival),
          [LLM_REQUEST.queue]: s(scheduled - arrival),
          [LLM_REQUEST.prefill]: s(first - scheduled),
          [LLM_REQUEST.decode]: s(now - first),
          [LLM_REQUEST.inference]: s(now - scheduled),
          [LLM_REQUEST.promptTokens]: seq.promptLen,
          [LLM_REQUEST.completionTokens]: seq.generated,
          [LLM_REQUEST.requestId]: req.requestId,
          [LLM_REQUEST.maxTokens]: req.maxTokens,
        },
      }, parent).end(epochMs(now));
    },
    shutdown: () => provider.shutdown(),
  };
}
