// The run as text: the tables the console prints and the lead pastes into README.

import type { BenchResult } from './bench.js';
import { checkReferences, goalLine, referenceLine } from './goals.js';
import { gatewaysOf, viaGateway } from './oracle.js';
import type { StrategySummary } from './summary.js';
import { turnsTable } from './turn-stats.js';

export const LABELS: Record<string, string> = {
  'round-robin': 'round-robin',
  'least-loaded': 'least-loaded',
  'session-hash': 'session-hash (ring, no load cap)',
  affinity: '**warmroute** (affinity)',
  'warmroute-events': '**warmroute** + vLLM KV events (exact residency)',
  oracle: 'oracle (session i → replica i mod R, no gateway)',
};

/** Not applicable (no gateway), as opposed to '–', not measured. */
export const NO_GATEWAY = '—';

const ms = (v: number | null | undefined, d = 0) => (v === null || v === undefined || !Number.isFinite(v) ? '–' : v.toFixed(d));
const pct = (v: number | null | undefined) => (v === null || v === undefined ? '–' : `${(v * 100).toFixed(1)}%`);
const ratio = (v: number | null | undefined) => (v === null || v === undefined ? '–' : v.toFixed(2));
const label = (s: StrategySummary) => {
  const n = gatewaysOf(s.strategy);
  return LABELS[s.strategy] ?? (n > 1 ? `**warmroute**, ${n} gateways (Redis; each request to a random one)` : s.strategy);
};

function row(cells: string[]): string {
  return `| ${cells.join(' | ')} |`;
}

const overhead = (s: StrategySummary) => (viaGateway(s.strategy) ? `${ms(s.overhead.p50Ms, 3)} / ${ms(s.overhead.p99Ms, 3)}` : NO_GATEWAY);
const routes = (s: StrategySummary) => (viaGateway(s.strategy) ? Object.entries(s.routes).map(([k, v]) => `${k} ${v}`).join(', ') : NO_GATEWAY);

/** The short table `npm run demo` prints. */
export function shortTable(summaries: readonly StrategySummary[]): string {
  return [
    row(['strategy', 'TTFT p50 ms', 'p90', 'p99', `turns > ${summaries[0]?.budgetMs ?? 300} ms`, 'cache hit rate', 'gateway overhead p50 / p99 ms', 'max/avg load']),
    row(['---', '---:', '---:', '---:', '---:', '---:', '---:', '---:']),
    ...summaries.map((s) => row([
      label(s), ms(s.ttft.p50), ms(s.ttft.p90), ms(s.ttft.p99), `${s.overBudget} / ${s.ttft.n}`, pct(s.hitRate),
      overhead(s), ratio(s.load.maxOverAvg),
    ])),
  ].join('\n');
}

/** Failed requests per strategy, with their most common error (printed when any failed). */
export function failureTable(summaries: readonly StrategySummary[], records: readonly { strategy: string; ok: boolean; error: string | null }[]): string {
  const rows = summaries.map((s) => {
    const errors = new Map<string, number>();
    for (const r of records) if (r.strategy === s.strategy && !r.ok) errors.set(r.error ?? '?', (errors.get(r.error ?? '?') ?? 0) + 1);
    const top = [...errors].sort((a, b) => b[1] - a[1])[0];
    return row([label(s), `${s.errors} / ${s.requests}`, top ? `${top[0]} (${top[1]})` : '–']);
  });
  return [row(['strategy', 'failed requests', 'most common error']), row(['---', '---:', '---']), ...rows].join('\n');
}

export function fullTables(summaries: readonly StrategySummary[]): string {
  const main = [
    row(['strategy', 'TTFT p50 ms', 'p90', 'p99', `turns > ${summaries[0]?.budgetMs ?? 300} ms`, 'hit rate (vLLM)', 'of ideal', 'max/avg load (served)', 'peak in flight per replica', 'gateway overhead p50 / p99 ms']),
    row(['---', '---:', '---:', '---:', '---:', '---:', '---:', '---:', '---:', '---:']),
    ...summaries.map((s) => row([
      label(s), ms(s.ttft.p50), ms(s.ttft.p90), ms(s.ttft.p99), `${s.overBudget} / ${s.ttft.n}`, pct(s.hitRate),
      s.hitRate !== null && s.idealHitRate ? pct(s.hitRate / s.idealHitRate) : '–', ratio(s.load.maxOverAvg),
      Object.values(s.load.peakInflight).join(' / ') || '–', overhead(s),
    ])),
  ];
  const keys = [
    row(['strategy', 'keyed TTFT p50 / p90 ms', 'keyless TTFT p50 / p90 ms', 'keyed hit rate', 'keyless hit rate', 'route reasons']),
    row(['---', '---:', '---:', '---:', '---:', '---']),
    ...summaries.map((s) => row([
      label(s), `${ms(s.keyed.ttft.p50)} / ${ms(s.keyed.ttft.p90)}`, `${ms(s.keyless.ttft.p50)} / ${ms(s.keyless.ttft.p90)}`,
      pct(s.keyed.hitRate), pct(s.keyless.hitRate), routes(s),
    ])),
  ];
  const turns = summaries.some((s) => s.turns) ? `\n\nPer caller turn next to per request (a turn: first request sent → first content of its last call; canned turns call no model):\n\n${turnsTable(summaries.map((s) => ({ label: label(s), budgetMs: s.budgetMs, turns: s.turns })))}` : '';
  return `${main.join('\n')}\n\n${keys.join('\n')}${turns}`;
}

export function paramsLine(r: BenchResult): string {
  const w = r.params.workload;
  const kv = r.params.kvBlocks === undefined ? '' : `, ${r.params.kvBlocks} KV blocks each`;
  const warm = !r.params.warmup ? 'cold replicas, no warmup'
    : r.pressure ? "under KV pressure (the agents' prompts together pass 90% of one replica's cache): each agent warmed once where its sessions go, through the gateway (the oracle: on the replicas of its plan)"
      : "every agent's prompt warmed on every replica first";
  const ramp = w.startRamp ? `, starting at a rising rate over ${Math.round(w.startSpreadMs / 1000)} s` : '';
  const api = (r.params.api ?? 'chat') === 'chat' ? '' : ' over the Responses API (keyed sessions chained by previous_response_id with store: true, keyless ones resending their history with store: false)';
  return `${r.params.replicas} simulated vLLM replicas (H100-calibrated${kv}; ${warm}), ${w.sessions} concurrent voice sessions × ${w.turns} turns${ramp}${api}, ` +
    `${w.groups} agents with ${w.systemTokens[0]}–${w.systemTokens[1]}-token system prompts, utterances ${w.userTokens[0]}–${w.userTokens[1]} tokens, ` +
    `answers ${r.params.outputTokens[0]}–${r.params.outputTokens[1]} tokens, ${Math.round(w.toolTurnShare * 100)}% tool turns, ` +
    `${Math.round(w.keylessShare * 100)}% keyless sessions, think ${w.thinkMs[0]}–${w.thinkMs[1]} ms, seed ${w.seed}; ` +
    `${r.machine.cpus} × ${r.machine.cpu}, Node ${r.machine.node}.`;
}

export const ORACLE_NOTE = "Oracle = no gateway at all: the client sends session i's every request straight to replica i mod R, chosen up front " +
  "(perfect stickiness, even session counts), with the same fleet reset, warmup and workload as the others; its in flight is sampled from the client's records.";

export const MULTI_GATEWAY_NOTE = 'warmroute with N gateways: its gateway overhead is read from the N gateways\' histograms merged bucket by bucket, ' +
  'and its peak in flight per replica from the client\'s records (as the oracle\'s), since the gateways\' separate in-flight counts peak at different moments.';

export function markdownReport(r: BenchResult): string {
  const wr = r.summaries.find((s) => s.strategy === 'affinity');
  return [
    `# Voice sessions: warmroute vs the usual routers (${r.when})`,
    '',
    paramsLine(r),
    '',
    'TTFT = request sent → first content chunk, at the client, every request of every turn. Hit rate = Σ vllm:prefix_cache_hits_total / Σ vllm:prefix_cache_queries_total over the replicas, delta over the run. ' +
      'Ideal = every session on a replica of its own with unbounded KV, its agent\'s system prompt warm once any earlier request computed it (replay of the run\'s exact token streams through a model of the simulator\'s prefix cache).',
    '',
    ...(r.summaries.some((s) => !viaGateway(s.strategy)) ? [ORACLE_NOTE, ''] : []),
    ...(r.summaries.some((s) => gatewaysOf(s.strategy) > 1) ? [MULTI_GATEWAY_NOTE, ''] : []),
    fullTables(r.summaries),
    '',
    ...(r.summaries.some((s) => s.errors > 0) ? [failureTable(r.summaries, r.records), ''] : []),
    wr ? `Ideal hit rate for this workload: ${pct(wr.idealHitRate)}.` : '',
    '',
    '```',
    ...r.goals.map(goalLine),
    ...checkReferences(r.summaries).map(referenceLine),
    '```',
    '',
  ].join('\n');
}
