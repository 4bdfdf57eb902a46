// The bench:peers table, as the console prints it and README carries it.

import type { PeersResult, PeerSummary } from './bench.js';

const ms = (v: number | null | undefined, d = 0) => (v === null || v === undefined || !Number.isFinite(v) ? '–' : v.toFixed(d));
const pct = (v: number | null | undefined) => (v === null || v === undefined ? '–' : `${(v * 100).toFixed(1)}%`);
const row = (cells: string[]) => `| ${cells.join(' | ')} |`;

/** The best p90 among the peers that failed no turn (not warmroute, not round-robin) over warmroute's. */
export function p90Lead(summaries: readonly PeerSummary[]): { peer: string; ratio: number } | null {
  const wr = summaries.find((s) => s.strategy === 'warmroute');
  // A peer that failed turns is not a fair yardstick either way: it is listed, not compared.
  const peers = summaries.filter((s) => !s.strategy.startsWith('warmroute') && s.strategy !== 'round-robin' && s.errors === 0);
  if (!wr || peers.length === 0) return null;
  const best = peers.reduce((a, b) => (b.ttft.p90 < a.ttft.p90 ? b : a));
  return { peer: best.label, ratio: best.ttft.p90 / wr.ttft.p90 };
}

export function peersTable(summaries: readonly PeerSummary[]): string {
  return [
    row(['router', 'TTFT p50 ms', 'p90', 'p99', 'keyed / keyless p90', 'cache hit rate (replicas)', 'prompt tokens per replica', 'failed turns', 'added latency p50 ms (direct p50)', 'replica TTFT / queue / prefill, mean ms', 'router CPU ms / request']),
    row(['---', '---:', '---:', '---:', '---:', '---:', '---', '---:', '---:', '---:', '---:']),
    ...summaries.map((s) => row([
      s.label, ms(s.ttft.p50), ms(s.ttft.p90), ms(s.ttft.p99),
      `${ms(s.keyed.ttft.p90)} / ${ms(s.keyless.ttft.p90)}`,
      pct(s.hitRate), (s.replicaShare ?? []).map((x) => `${Math.round(x * 100)}%`).join(' / ') || '–', `${s.errors} / ${s.requests}`, `${ms(s.added.addedP50Ms, 1)} (${ms(s.added.directP50Ms, 1)})`,
      s.engine ? `${ms(s.engine.ttftMs)} / ${ms(s.engine.queueMs)} / ${ms(s.engine.prefillMs)}` : '–', ms(s.routerCpuMsPerRequest, 2),
    ])),
  ].join('\n');
}

export function peersReport(r: PeersResult): string {
  const w = r.params.workload;
  const versions = (r.fleet.versions ?? {}) as Record<string, string>;
  const lead = p90Lead(r.summaries);
  const ratio = typeof r.fleet.tokenRatio === 'number' && r.fleet.tokenRatio !== 1 ? r.fleet.tokenRatio : null;
  const served = ratio === null ? '' : ` (≈ ${w.systemTokens.map((t) => Math.round(t * ratio)).join('–')} of the served model's tokens)`;
  const lines = [
    `### bench:peers — ${r.params.preset}, ${r.when.slice(0, 10)}`,
    '',
    `Fleet: ${r.fleet.kind}, ${r.fleet.replicas.length} replicas of \`${r.fleet.model}\`${r.fleet.kvBlocks ? `, ${r.fleet.kvBlocks} KV blocks each` : ''}${r.fleet.capacityTokens ? ` (${r.fleet.capacityTokens} tokens of KV each)` : ''}. ` +
      `Workload: ${w.sessions} sessions × ${w.turns} turns, ${w.groups} agents with ${w.systemTokens.join('–')}-token system prompts${served}, ` +
      `${Math.round(w.keylessShare * 100)}% keyless, ${r.params.tools ? `tool turns ${Math.round(w.toolTurnShare * 100)}%` : 'no tools'}${r.params.maxTokens !== null ? `, answers ≤ ${r.params.maxTokens} tokens` : ''}. ` +
      `${r.params.rounds > 1 ? `${r.params.rounds} rounds, each router once a round in a rotated order, figures pooled. ` : ''}Machine: ${r.machine.cpus} × ${r.machine.cpu}.`,
    `Versions: ${Object.entries(versions).map(([k, v]) => `${k} ${v}`).join(', ')}.` +
      (typeof r.fleet.replicaNice === 'number' ? ` Replicas at nice ${r.fleet.replicaNice}${r.fleet.replicaNice > 0 ? ' (they yield the CPU to the router; `npm run fleet:vllm -- --nice 0` for the contended case)' : ''}; every router in a session of its own.` : ''),
    '',
    peersTable(r.summaries),
    '',
    'TTFT: request sent → first streamed token, at the client. Cache hit rate: Σ `vllm:prefix_cache_hits` / Σ `vllm:prefix_cache_queries` over the replicas during the run. ' +
      'Added latency: p50 TTFT of a tiny streamed request through the router minus straight to a replica, alternating, on the idle fleet. ' +
      'Replica TTFT / queue / prefill: the means of the replicas\' own histograms (`vllm:time_to_first_token_seconds`, `_request_queue_time_seconds`, `_request_prefill_time_seconds`) over the same runs: the client\'s TTFT less the replica\'s is what happened outside the engine. ' +
      'Router CPU: user + system time of the router\'s processes during the runs, per request: on a small machine it is taken from the replicas.',
  ];
  if (r.summaries.some((s) => s.salted)) lines.push('', 'The fleet could not empty its caches between routers: each router ran on system prompts of its own (salted), warmed alike before it.');
  if (lead) lines.push('', `Best peer p90 / warmroute p90: ${lead.ratio.toFixed(2)}× (${lead.peer}).`);
  if (r.aborted) lines.push('', `**Ended early**: ${r.aborted}. The rows above cover the rounds completed before.`);
  for (const s of r.skipped) lines.push('', `Not run: ${s.label}: ${s.reason.split('\n')[0]}`);
  return lines.join('\n');
}
