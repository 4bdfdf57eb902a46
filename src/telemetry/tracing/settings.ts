import { TRACE_PROTOCOLS, TRACE_SAMPLERS, type TracingConfig } from '../../config/schema.js';

export type TraceProtocol = (typeof TRACE_PROTOCOLS)[number];
export type SamplerName = (typeof TRACE_SAMPLERS)[number];

export interface BatchSettings {
  readonly maxQueueSize: number;
  readonly maxExportBatchSize: number;
  readonly scheduledDelayMs: number;
  readonly exportTimeoutMs: number;
}

/** Tracing as it runs: there is one only when a traces endpoint is configured and the SDK is not disabled. */
export interface TracingSettings {
  /** The OTLP/HTTP traces URL the spans are posted to. */
  readonly url: string;
  readonly protocol: TraceProtocol;
  readonly headers: Readonly<Record<string, string>>;
  /** One export's bound, retries included. */
  readonly timeoutMs: number;
  readonly serviceName: string;
  readonly resourceAttributes: Readonly<Record<string, string>>;
  readonly sampler: SamplerName;
  /** The ratio of the *traceidratio samplers, in [0, 1]. */
  readonly samplerArg: number;
  readonly batch: BatchSettings;
}

type Env = Readonly<Record<string, string | undefined>>;

const set = (v: string | undefined): v is string => v !== undefined && v.trim() !== '';

/** `k=v,k2=v2` with percent-encoded values (the OTel spec's form of OTEL_*_HEADERS and OTEL_RESOURCE_ATTRIBUTES). */
export function parseKeyValues(text: string, what: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of text.split(',')) {
    if (part.trim() === '') continue;
    const eq = part.indexOf('=');
    if (eq <= 0) throw new Error(`${what}: "${part.trim()}" is not key=value`);
    try {
      out[decodeURIComponent(part.slice(0, eq).trim())] = decodeURIComponent(part.slice(eq + 1).trim());
    } catch {
      throw new Error(`${what}: "${part.trim()}" is not percent-encoded correctly`);
    }
  }
  return out;
}

/** OTEL_EXPORTER_OTLP_ENDPOINT is a base: the signal's path is appended to it (the spec's rule). */
const tracesPathOf = (base: string) => `${base.replace(/\/+$/, '')}/v1/traces`;

function httpUrl(url: string, what: string): string {
  if (!/^https?:\/\/[^/]/.test(url)) throw new Error(`${what}: "${url}" is not an http(s):// URL`);
  return url;
}

function oneOf<T extends string>(value: string, allowed: readonly T[], what: string): T {
  const v = value.trim().toLowerCase();
  if ((allowed as readonly string[]).includes(v)) return v as T;
  throw new Error(`${what}: "${value}" is not one of ${allowed.join(', ')}`);
}

function count(env: Env, name: string, fallback: number, min: number): number {
  const v = env[name];
  if (!set(v)) return fallback;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) throw new Error(`${name}: "${v}" is not an integer of at least ${min}`);
  return n;
}

/**
 * Tracing from the config file's `tracing` section and the standard OpenTelemetry environment
 * variables, which win over the file (they are how every OTel SDK is pointed at a collector).
 * null: tracing is off (no traces endpoint anywhere, or OTEL_SDK_DISABLED=true / tracing.disabled).
 * A value that cannot be used throws at start, naming the variable or key.
 */
export function tracingSettings(file: TracingConfig, env: Env): TracingSettings | null {
  if ((env.OTEL_SDK_DISABLED ?? '').trim().toLowerCase() === 'true' || file.disabled) return null;
  let url: string | null = null;
  if (set(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)) url = httpUrl(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT.trim(), 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  else if (set(env.OTEL_EXPORTER_OTLP_ENDPOINT)) url = tracesPathOf(httpUrl(env.OTEL_EXPORTER_OTLP_ENDPOINT.trim(), 'OTEL_EXPORTER_OTLP_ENDPOINT'));
  else if (file.tracesEndpoint !== null) url = file.tracesEndpoint;
  else if (file.endpoint !== null) url = tracesPathOf(file.endpoint);
  if (url === null) return null;

  const protocolEnv = set(env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL) ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL' : set(env.OTEL_EXPORTER_OTLP_PROTOCOL) ? 'OTEL_EXPORTER_OTLP_PROTOCOL' : null;
  const protocol = protocolEnv === null ? file.protocol : oneOf(env[protocolEnv]!, TRACE_PROTOCOLS, `${protocolEnv} (grpc is not supported: use http/protobuf)`);

  const headers = { ...file.headers };
  if (set(env.OTEL_EXPORTER_OTLP_HEADERS)) Object.assign(headers, parseKeyValues(env.OTEL_EXPORTER_OTLP_HEADERS, 'OTEL_EXPORTER_OTLP_HEADERS'));
  if (set(env.OTEL_EXPORTER_OTLP_TRACES_HEADERS)) Object.assign(headers, parseKeyValues(env.OTEL_EXPORTER_OTLP_TRACES_HEADERS, 'OTEL_EXPORTER_OTLP_TRACES_HEADERS'));

  const timeoutMs = count(env, set(env.OTEL_EXPORTER_OTLP_TRACES_TIMEOUT) ? 'OTEL_EXPORTER_OTLP_TRACES_TIMEOUT' : 'OTEL_EXPORTER_OTLP_TIMEOUT', file.timeoutMs, 1);

  const resourceAttributes = { ...file.resourceAttributes };
  if (set(env.OTEL_RESOURCE_ATTRIBUTES)) Object.assign(resourceAttributes, parseKeyValues(env.OTEL_RESOURCE_ATTRIBUTES, 'OTEL_RESOURCE_ATTRIBUTES'));
  // The spec's order: OTEL_SERVICE_NAME, then service.name in the resource attributes, then the default.
  const serviceName = set(env.OTEL_SERVICE_NAME) ? env.OTEL_SERVICE_NAME.trim() : resourceAttributes['service.name'] ?? file.serviceName;

  const sampler = set(env.OTEL_TRACES_SAMPLER) ? oneOf(env.OTEL_TRACES_SAMPLER, TRACE_SAMPLERS, 'OTEL_TRACES_SAMPLER') : file.sampler;
  let samplerArg = file.samplerArg;
  if (set(env.OTEL_TRACES_SAMPLER_ARG)) {
    samplerArg = Number(env.OTEL_TRACES_SAMPLER_ARG);
    if (!(samplerArg >= 0 && samplerArg <= 1)) throw new Error(`OTEL_TRACES_SAMPLER_ARG: "${env.OTEL_TRACES_SAMPLER_ARG}" is not a ratio in [0, 1]`);
  }

  const b = file.batch;
  const batch: BatchSettings = {
    maxQueueSize: count(env, 'OTEL_BSP_MAX_QUEUE_SIZE', b.maxQueueSize, 1),
    maxExportBatchSize: count(env, 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE', b.maxExportBatchSize, 1),
    scheduledDelayMs: count(env, 'OTEL_BSP_SCHEDULE_DELAY', b.scheduledDelayMs, 0),
    exportTimeoutMs: count(env, 'OTEL_BSP_EXPORT_TIMEOUT', b.exportTimeoutMs, 1),
  };
  return { url, protocol, headers, timeoutMs, serviceName, resourceAttributes, sampler, samplerArg, batch };
}
