// The --traces table: per request, the probe's TTFT, the gateway's part of it and the replica's.

import { align } from './align.js';
import type { ProbeResult, TracedSend } from './run.js';

const SEND = { only: '', first: ' 1st', second: ' 2nd' } as const;

export function traceLines(traces: NonNullable<ProbeResult['traces']>): string[] {
  const lines = ['', `traces from ${traces.queryUrl}, per request, ms (gateway: its SERVER span; replica: vLLM's llm_request span)`];
  const head = ['case', 'ep', 'trial', 'client', 'gw ttft', 'gw own', 'front', 'back', 'vllm ttft', 'queue', 'prefill', 'decode', 'cached', 'replica · route'];
  const table: string[][] = [head];
  for (const s of traces.sends) table.push(row(s));
  lines.push(...align(table, new Set([0, 1, 13])));
  lines.push(
    'client: the probe\'s TTFT · gw ttft: the gateway\'s (gen_ai.response.time_to_first_chunk) · gw own: its parse + route + queue + connect hops',
    'front: request written → llm_request\'s start (the network and the replica\'s API front end) · back: gw ttft − gw own − front − vllm ttft (the first token\'s way back)',
    'queue, prefill, decode, vllm ttft: the replica\'s gen_ai.latency.*',
  );
  const missing = traces.sends.filter((s) => s.trace === null).length;
  const noReplica = traces.sends.filter((s) => s.trace !== null && s.trace.replica === null).length;
  const noGateway = traces.sends.filter((s) => s.trace !== null && s.trace.gateway === null).length;
  if (missing > 0) lines.push(`note: ${missing} of ${traces.sends.length} traces never reached the query API (no tracing on the path, or its exporter is slower than --traces-wait-ms)`);
  if (noReplica > 0) lines.push(`note: ${noReplica} traces hold no llm_request span: the replica is not traced (vLLM: --otlp-traces-endpoint)`);
  if (noGateway > 0) lines.push(`note: ${noGateway} traces hold no gateway span: straight to the replica, or the gateway is not traced (OTEL_EXPORTER_OTLP_ENDPOINT)`);
  return lines;
}

function row(s: TracedSend): string[] {
  const g = s.trace?.gateway ?? null;
  const r = s.trace?.replica ?? null;
  const where = g ? [g.replica ?? '?', g.route].filter(Boolean).join(' · ') + (g.attempts !== null && g.attempts > 1 ? ` (${g.attempts} attempts)` : '') : r?.service ?? '';
  return [
    s.case + SEND[s.send], s.endpoint, String(s.trial),
    ms(s.clientTtftMs), ms(g?.ttftMs ?? null), ms(g?.ownMs ?? null), ms(s.trace?.frontMs ?? null), ms(s.trace?.backMs ?? null),
    ms(r?.ttftMs ?? null), ms(r?.queueMs ?? null), ms(r?.prefillMs ?? null), ms(r?.decodeMs ?? null),
    g?.cachedTokens == null ? '-' : String(g.cachedTokens), s.trace === null ? '(no trace)' : where,
  ];
}

const ms = (v: number | null) => (v === null ? '-' : v.toFixed(1));
