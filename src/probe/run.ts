// Orchestrates a probe run: TCP connect samples, warm-up, then every case × trial × endpoint in
// sequence on one warm connection per endpoint. Endpoints alternate within each trial (A, B, A,
// B, ...) so drift over the run lands on both alike.

import { openEndpoint, resolveBaseUrl, asConnectionError, warmUp, type Endpoint, type EndpointAddress } from './endpoint.js';
import { measureChat, type TrialSample } from './measure.js';
import { buildMessages, approxTokens, CASES, CASE_IDS, newNonce, type CaseId } from './prompts.js';
import { median, summarize, type Summary } from './stats.js';
import { connectOnce, resolveTcpTarget } from './tcp.js';
import { checkQueryApi } from './jaeger.js';
import { newTraceContext, readTraces, type ProbeTraceContext, type TraceBreakdown } from './traces.js';

export interface ProbeOptions {
  baseUrl: string;
  compareUrl?: string;
  model: string;
  trials?: number;
  apiKey?: string;
  /** Extra request headers, sent to every endpoint. */
  headers?: Record<string, string>;
  cases?: CaseId[];
  timeoutMs?: number;
  maxTokens?: number;
  /** Multiplies the large prompt sizes; tests use small values to stay fast. */
  scale?: number;
  /** Jaeger's query API: each request gets a traceparent of its own and its trace is read back after the run. */
  tracesUrl?: string;
  /** How long to wait after the run for every trace's spans to arrive. */
  tracesWaitMs?: number;
  /** Called after every timed send (progress display, live benchmarks). */
  onSample?: (event: SampleEvent) => void;
}

export interface SampleEvent {
  endpoint: string;
  case: CaseId;
  send: SendKind;
  trial: number;
  sample: TrialSample;
}

/** `only` for single-send cases; repeat9k reports its `first` (cold) and `second` (warm) sends. */
export type SendKind = 'only' | 'first' | 'second';

export interface EndpointInfo {
  label: string;
  baseUrl: string;
  chatUrl: string;
  tcpConnectMs: Summary | null;
  warmupStatus: number;
  /** Connections the HTTP client opened; 1 unless a failure forced a reconnect. */
  connections: number;
}

export interface EndpointRow {
  endpoint: string;
  ttftMs: Summary | null;
  ok: number;
  failed: number;
  promptTokens: number | null;
  cachedTokens: number | null;
  samples: TrialSample[];
}

export interface RowResult {
  case: CaseId;
  send: SendKind;
  approxPromptTokens: number;
  results: EndpointRow[];
  /** With --compare: second endpoint's median over the first's, and their difference (B − A). */
  compare: { ratio: number | null; diffMs: number | null } | null;
}

/** One timed request's trace, read back from the query API (--traces). */
export interface TracedSend {
  endpoint: string;
  case: CaseId;
  send: SendKind;
  trial: number;
  traceId: string;
  /** The probe's own TTFT for this request; null when it failed. */
  clientTtftMs: number | null;
  /** What the trace held; null when the query API never had it. */
  trace: TraceBreakdown | null;
}

export interface ProbeResult {
  model: string;
  trials: number;
  maxTokens: number;
  scale: number;
  startedAt: string;
  endpoints: EndpointInfo[];
  rows: RowResult[];
  /** With --traces: every timed request's trace, in the order sent; null without. */
  traces: { queryUrl: string; sends: TracedSend[] } | null;
  /** Every case on every endpoint produced at least one successful trial. */
  ok: boolean;
}

export const DEFAULTS = { trials: 5, timeoutMs: 60_000, maxTokens: 8, scale: 1, tracesWaitMs: 15_000 } as const;

export async function runProbe(opts: ProbeOptions): Promise<ProbeResult> {
  const trials = opts.trials ?? DEFAULTS.trials;
  const timeoutMs = opts.timeoutMs ?? DEFAULTS.timeoutMs;
  const maxTokens = opts.maxTokens ?? DEFAULTS.maxTokens;
  const scale = opts.scale ?? DEFAULTS.scale;
  const caseIds = opts.cases ?? [...CASE_IDS];
  // Lower-cased names so an explicit Authorization header wins over apiKey, whatever its casing.
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(opts.headers ?? {})) headers[k.toLowerCase()] = v;
  if (opts.apiKey && headers.authorization === undefined) headers.authorization = `Bearer ${opts.apiKey}`;

  const addresses = [opts.baseUrl, ...(opts.compareUrl ? [opts.compareUrl] : [])].map(resolveBaseUrl);
  const labels = ['A', 'B'];
  const startedAt = new Date().toISOString();
  if (opts.tracesUrl) await checkQueryApi(opts.tracesUrl, timeoutMs);
  const traced: { send: Omit<TracedSend, 'trace'>; ctx: ProbeTraceContext }[] = [];

  const tcp = await measureTcp(addresses, trials, timeoutMs);
  const endpoints = addresses.map((a, i) => openEndpoint(labels[i], a));
  try {
    const warm: number[] = [];
    for (const ep of endpoints) warm.push(await warmUp(ep, headers, timeoutMs));

    const samples = new Map<string, TrialSample[]>();
    const record = (ep: Endpoint, id: CaseId, send: SendKind, trial: number, sample: TrialSample): void => {
      const key = `${id}/${send}/${ep.label}`;
      samples.set(key, [...(samples.get(key) ?? []), sample]);
      opts.onSample?.({ endpoint: ep.label, case: id, send, trial, sample });
    };
    /** One timed send; with --traces, under a trace of its own. */
    const timed = async (ep: Endpoint, id: CaseId, sendKind: SendKind, trial: number, req: Parameters<typeof measureChat>[1]): Promise<void> => {
      const ctx = opts.tracesUrl ? newTraceContext() : null;
      const sample = await send(ep, ctx ? { ...req, headers: { ...req.headers, traceparent: ctx.traceparent } } : req);
      if (ctx) traced.push({ ctx, send: { endpoint: ep.label, case: id, send: sendKind, trial, traceId: ctx.traceId, clientTtftMs: sample.ttftMs } });
      record(ep, id, sendKind, trial, sample);
    };

    for (const id of caseIds) {
      const spec = CASES[id];
      for (let trial = 1; trial <= trials; trial++) {
        for (const ep of endpoints) {
          // A fresh nonce per endpoint too: if A and B share a backend (gateway vs. direct), B must
          // not find A's prompt already cached.
          const messages = buildMessages(spec, spec.nonce ? newNonce() : null, scale);
          const body = Buffer.from(
            JSON.stringify({
              model: opts.model,
              messages,
              max_tokens: maxTokens,
              stream: true,
              stream_options: { include_usage: true },
            }),
          );
          const req = { path: ep.address.chatPath, headers, body, timeoutMs };
          if (spec.repeat) {
            await timed(ep, id, 'first', trial, req);
            await timed(ep, id, 'second', trial, req);
          } else {
            await timed(ep, id, 'only', trial, req);
          }
        }
      }
    }

    const rows = caseIds.flatMap((id) =>
      (CASES[id].repeat ? (['first', 'second'] as const) : (['only'] as const)).map((sendKind) =>
        buildRow(id, sendKind, approxTokens(CASES[id], scale), endpoints, samples),
      ),
    );
    let traces: ProbeResult['traces'] = null;
    if (opts.tracesUrl) {
      const read = await readTraces(opts.tracesUrl, traced.map((t) => t.ctx), opts.tracesWaitMs ?? DEFAULTS.tracesWaitMs, timeoutMs);
      traces = { queryUrl: opts.tracesUrl, sends: traced.map((t) => ({ ...t.send, trace: read.get(t.ctx.traceId) ?? null })) };
    }
    return {
      model: opts.model,
      trials,
      maxTokens,
      scale,
      startedAt,
      endpoints: endpoints.map((ep, i) => ({
        label: ep.label,
        baseUrl: ep.address.baseUrl,
        chatUrl: ep.address.origin + ep.address.chatPath,
        tcpConnectMs: summarize(tcp[i]),
        warmupStatus: warm[i],
        connections: ep.connections(),
      })),
      rows,
      traces,
      ok: rows.every((r) => r.results.every((e) => e.ok > 0)),
    };
  } finally {
    await Promise.all(endpoints.map((ep) => ep.close()));
  }
}

async function send(ep: Endpoint, req: Parameters<typeof measureChat>[1]): Promise<TrialSample> {
  const t0 = process.hrtime.bigint();
  try {
    return await measureChat(ep.client, req);
  } catch (err) {
    const conn = asConnectionError(ep.address, err);
    if (conn) throw conn;
    // Reset, closed socket, protocol error: one failed trial, not the end of the run.
    const message = err instanceof Error ? err.message : String(err);
    return {
      ok: false,
      ttftMs: null,
      headersMs: null,
      totalMs: Number(process.hrtime.bigint() - t0) / 1e6,
      status: null,
      promptTokens: null,
      cachedTokens: null,
      error: `request failed: ${message}`,
    };
  }
}

async function measureTcp(addresses: EndpointAddress[], n: number, timeoutMs: number): Promise<number[][]> {
  const targets = [];
  for (const a of addresses) targets.push(await resolveTcpTarget(a, timeoutMs));
  const out: number[][] = addresses.map(() => []);
  for (let i = 0; i < n; i++) {
    for (const [j, t] of targets.entries()) {
      try {
        out[j].push(await connectOnce(t.address, t.port, timeoutMs));
      } catch {
        // A lost sample here only thins the TCP figure; the HTTP trials report real failures.
      }
    }
  }
  return out;
}

function buildRow(
  id: CaseId,
  sendKind: SendKind,
  approx: number,
  endpoints: Endpoint[],
  samples: Map<string, TrialSample[]>,
): RowResult {
  const results = endpoints.map((ep): EndpointRow => {
    const list = samples.get(`${id}/${sendKind}/${ep.label}`) ?? [];
    const good = list.filter((s) => s.ok);
    const nums = (pick: (s: TrialSample) => number | null): number[] =>
      good.map(pick).filter((v): v is number => v !== null);
    return {
      endpoint: ep.label,
      ttftMs: summarize(nums((s) => s.ttftMs)),
      ok: good.length,
      failed: list.length - good.length,
      promptTokens: median(nums((s) => s.promptTokens)),
      cachedTokens: median(nums((s) => s.cachedTokens)),
      samples: list,
    };
  });
  let compare: RowResult['compare'] = null;
  if (results.length === 2) {
    const a = results[0].ttftMs?.median ?? null;
    const b = results[1].ttftMs?.median ?? null;
    compare = {
      ratio: a !== null && b !== null && a > 0 ? b / a : null,
      diffMs: a !== null && b !== null ? b - a : null,
    };
  }
  return { case: id, send: sendKind, approxPromptTokens: approx, results, compare };
}
