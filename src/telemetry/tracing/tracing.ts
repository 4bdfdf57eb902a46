import type { IncomingHttpHeaders } from 'node:http';
import type { Logger } from 'pino';
import type { SpanContext } from '@opentelemetry/api';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler, AlwaysOnSampler, ParentBasedSampler, TraceIdRatioBasedSampler, TracerProvider,
  type Sampler, type SpanExporter,
} from '@opentelemetry/sdk-trace';
import type { Metrics } from '../metrics.js';
import { createCountedBatchProcessor, createOtlpExporter, dropReporter } from './export.js';
import { beginRequestTrace, type RequestTrace, type TurnLinks } from './request-trace.js';
import type { SamplerName, TracingSettings } from './settings.js';

/** The gateway's tracer: one per process, made at start only when tracing is on. */
export interface Tracing {
  /** The exchange's SERVER span, parented by the caller's traceparent/tracestate when it sent one. */
  begin(headers: IncomingHttpHeaders, method: string, received: number): RequestTrace;
  /** Exports what is queued (a drain's end). */
  flush(): Promise<void>;
  shutdown(): Promise<void>;
}

export function samplerOf(name: SamplerName, ratio: number): Sampler {
  switch (name) {
    case 'always_on': return new AlwaysOnSampler();
    case 'always_off': return new AlwaysOffSampler();
    case 'traceidratio': return new TraceIdRatioBasedSampler(ratio);
    case 'parentbased_always_on': return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case 'parentbased_always_off': return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio': return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio) });
  }
}

/** Caller turns whose first call is remembered for links; the oldest is forgotten past it. */
const TURNS_LINKED = 4096;

function createTurnLinks(): TurnLinks {
  const firsts = new Map<string, SpanContext>();
  return {
    first: (key) => firsts.get(key),
    remember(key, ctx) {
      firsts.set(key, ctx);
      if (firsts.size > TURNS_LINKED) firsts.delete(firsts.keys().next().value as string);
    },
  };
}

export interface TracingDeps {
  readonly log: Logger;
  readonly metrics: Metrics;
  /** Tests: where spans go instead of the OTLP/HTTP exporter. */
  readonly exporter?: SpanExporter;
}

/**
 * The OpenTelemetry trace SDK, not registered globally: the gateway passes its contexts
 * explicitly (no context manager, no instrumentation of anything else in the process).
 */
export function createTracing(s: TracingSettings, deps: TracingDeps): Tracing {
  const exporter = deps.exporter ?? createOtlpExporter(s);
  const dropped = dropReporter((reason, n) => deps.metrics.traceSpansDropped.inc({ reason }, n), deps.log);
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ ...s.resourceAttributes, 'service.name': s.serviceName }),
    sampler: samplerOf(s.sampler, s.samplerArg),
    spanProcessors: [createCountedBatchProcessor(exporter, s.batch, dropped)],
  });
  const tracer = provider.getTracer('warmroute');
  const links = createTurnLinks();
  return {
    begin: (headers, method, received) => beginRequestTrace(tracer, links, headers, method, received),
    flush: () => provider.forceFlush(),
    shutdown: () => provider.shutdown(),
  };
}
