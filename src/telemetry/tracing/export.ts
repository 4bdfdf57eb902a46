import type { Logger } from 'pino';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import { OTLPTraceExporter as OtlpJsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as OtlpProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { BatchSpanProcessor, type ReadableSpan, type Span, type SpanExporter, type SpanProcessor } from '@opentelemetry/sdk-trace';
import { TraceFlags, type Context } from '@opentelemetry/api';
import { throttle } from '../throttle.js';
import type { BatchSettings, TracingSettings } from './settings.js';

export const TRACE_DROP_REASONS = ['queue_full', 'export_failed'] as const;
export type TraceDropReason = (typeof TRACE_DROP_REASONS)[number];

/** Spans not delivered: `n` of them, for `reason` (the counter); `error` when an export failed. */
export type OnDropped = (reason: TraceDropReason, n: number, error?: Error) => void;

/**
 * Exports open at once, at most: as many as a flush of a full queue makes (a drain's end sends the
 * whole queue at once), and one more. Past it the exporter fails an export at once (counted). Open
 * exports hold batches taken out of the queue, so with a collector that is down or slow, spans in
 * memory stay within about twice the batch queue.
 */
const openExports = (b: BatchSettings) => Math.ceil(b.maxQueueSize / b.maxExportBatchSize) + 1;

export function createOtlpExporter(s: TracingSettings): SpanExporter {
  const opts = { url: s.url, headers: { ...s.headers }, timeoutMillis: s.timeoutMs, concurrencyLimit: openExports(s.batch) };
  return s.protocol === 'http/json' ? new OtlpJsonExporter(opts) : new OtlpProtoExporter(opts);
}

/**
 * The batch span processor, counted: the SDK's own drops the newest span silently when its queue is
 * full, so the spans waiting in it are counted here (handed in, minus handed to the exporter) and a
 * span that would not fit is counted as dropped instead; an export that fails counts its spans.
 */
export function createCountedBatchProcessor(inner: SpanExporter, batch: BatchSettings, dropped: OnDropped): SpanProcessor {
  let waiting = 0;
  const exporter: SpanExporter = {
    export(spans: ReadableSpan[], done: (r: ExportResult) => void) {
      waiting -= spans.length;
      inner.export(spans, (r) => {
        if (r.code !== ExportResultCode.SUCCESS) dropped('export_failed', spans.length, r.error);
        done(r);
      });
    },
    shutdown: () => inner.shutdown(),
    forceFlush: () => inner.forceFlush?.() ?? Promise.resolve(),
  };
  const bsp = new BatchSpanProcessor({
    exporter,
    maxQueueSize: batch.maxQueueSize,
    maxExportBatchSize: batch.maxExportBatchSize,
    scheduledDelayMillis: batch.scheduledDelayMs,
    exportTimeoutMillis: batch.exportTimeoutMs,
  });
  return {
    onStart(span: Span, parent: Context) { bsp.onStart(span, parent); },
    onEnd(span: ReadableSpan) {
      if ((span.spanContext().traceFlags & TraceFlags.SAMPLED) === 0) return;
      if (waiting >= batch.maxQueueSize) return dropped('queue_full', 1);
      waiting++;
      bsp.onEnd(span);
    },
    forceFlush: () => bsp.forceFlush(),
    shutdown: () => bsp.shutdown(),
  };
}

/** Counts every dropped span; says so in a warn line at most once a minute (with how many lines it held back). */
export function dropReporter(count: (reason: TraceDropReason, n: number) => void, log: Logger, intervalMs = 60_000): OnDropped {
  const warn = throttle(intervalMs);
  return (reason, n, error) => {
    count(reason, n);
    const suppressed = warn();
    if (suppressed === null) return;
    log.warn({ reason, spans: n, error: error?.message, suppressed }, reason === 'queue_full'
      ? 'trace spans dropped: the batch queue is full (the collector is slower than the traffic, or down); requests are served as before'
      : 'trace spans dropped: the collector did not take an export; requests are served as before');
  };
}
