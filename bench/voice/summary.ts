// Per-strategy figures from one run's records plus what the fleet and the gateway reported.

import type { GatewayMetrics, PrefixCounters } from './fleet.js';
import type { TurnRecord } from './run.js';
import type { TurnsSummary } from './turn-stats.js';
import { countBy, hitRate, maxOverAvg, mean, percentiles, type Percentiles } from './stats.js';

/** The gateway's hops as Server-Timing reports them, then the rest of the client's TTFT. */
export const HOP_NAMES = ['parse', 'route', 'queue', 'connect', 'upstream_headers', 'first_token'] as const;

export interface SubsetSummary {
  sessions: number;
  requests: number;
  ttft: Percentiles;
  hitRate: number | null;
  idealHitRate: number | null;
}

export interface StrategySummary {
  strategy: string;
  requests: number;
  errors: number;
  durationMs: number;
  truncated: boolean;
  ttft: Percentiles;
  budgetMs: number;
  overBudget: number;
  /** From the replicas' vllm:prefix_cache_hits_total / queries_total, delta over the run. */
  hitRate: number | null;
  /** The same from the usage chunks the client received (a cross-check). */
  clientHitRate: number | null;
  idealHitRate: number | null;
  load: {
    served: Record<string, number>;
    maxOverAvg: number | null;
    /** Sessions per replica (each where most of its requests went), the unit placement balances. */
    sessions: Record<string, number>;
    sessionsMaxOverAvg: number | null;
    peakInflight: Record<string, number>;
    meanInflight: Record<string, number>;
    meanInflightMaxOverAvg: number | null;
  };
  keyed: SubsetSummary;
  keyless: SubsetSummary;
  overhead: { p50Ms: number | null; p99Ms: number | null; serverTimingP50Ms: number | null; serverTimingP99Ms: number | null };
  hopsMeanMs: Record<string, number | null>;
  perTurn: { turn: number; n: number; p50: number; p90: number; hitRate: number | null }[];
  routes: Record<string, number>;
  /** Per caller turn next to per request (turn-stats.ts); absent in results written before turns were measured. */
  turns?: TurnsSummary;
}

export interface SummaryInput {
  strategy: string;
  records: readonly TurnRecord[];
  durationMs: number;
  truncated: boolean;
  replicas: number;
  budgetMs: number;
  counters: PrefixCounters | null;
  gateway: GatewayMetrics | null;
  inflight: { peak: Record<string, number>; mean: Record<string, number> } | null;
  /** No gateway (the oracle): the client's whole TTFT is the replica's queue, prefill and the wire. */
  direct?: boolean;
}

const ttftsOf = (rows: readonly TurnRecord[]) => rows.filter((r) => r.ok && r.ttftMs !== null).map((r) => r.ttftMs as number);

function idealRate(rows: readonly TurnRecord[]): number | null {
  let q = 0;
  let h = 0;
  for (const r of rows) {
    if (!r.ok || r.promptTokens === null || r.idealCachedTokens === null) continue;
    q += r.promptTokens;
    h += r.idealCachedTokens;
  }
  return q > 0 ? h / q : null;
}

function subset(rows: readonly TurnRecord[]): SubsetSummary {
  const ok = rows.filter((r) => r.ok);
  return {
    sessions: new Set(rows.map((r) => r.session)).size,
    requests: rows.length,
    ttft: percentiles(ttftsOf(rows)),
    hitRate: hitRate(ok),
    idealHitRate: idealRate(ok),
  };
}

const gatewayHops = ['parse', 'route', 'queue', 'connect'];

export function summarize(i: SummaryInput): StrategySummary {
  const ok = i.records.filter((r) => r.ok);
  const ttfts = ttftsOf(ok);
  const served = countBy(ok, (r) => r.replica);
  const overheads = ok.filter((r) => gatewayHops.every((h) => h in r.hops)).map((r) => gatewayHops.reduce((s, h) => s + r.hops[h], 0));
  const ov = percentiles(overheads);
  const hopsMeanMs: Record<string, number | null> = {};
  for (const h of HOP_NAMES.slice(0, -1)) hopsMeanMs[h] = mean(ok.filter((r) => h in r.hops).map((r) => r.hops[h]));
  // What the client waited beyond the hops the gateway reported before its headers: the replica's
  // queue and prefill after its headers, plus the wire. With no gateway, all of it.
  const rests = i.direct ? ttfts : ok.filter((r) => r.ttftMs !== null && HOP_NAMES.slice(0, -1).every((h) => h in r.hops))
    .map((r) => (r.ttftMs as number) - HOP_NAMES.slice(0, -1).reduce((s, h) => s + r.hops[h], 0));
  hopsMeanMs.first_token = mean(rests);
  const turns = [...new Set(ok.map((r) => r.turn))].sort((a, b) => a - b);
  const meanInflight = i.inflight?.mean ?? {};
  return {
    strategy: i.strategy,
    requests: i.records.length,
    errors: i.records.length - ok.length,
    durationMs: i.durationMs,
    truncated: i.truncated,
    ttft: percentiles(ttfts),
    budgetMs: i.budgetMs,
    overBudget: ttfts.filter((t) => t > i.budgetMs).length,
    hitRate: i.counters && i.counters.queries > 0 ? i.counters.hits / i.counters.queries : null,
    clientHitRate: hitRate(ok),
    idealHitRate: idealRate(ok),
    load: {
      served,
      maxOverAvg: maxOverAvg(served, i.replicas),
      sessions: sessionsPerReplica(ok),
      sessionsMaxOverAvg: maxOverAvg(sessionsPerReplica(ok), i.replicas),
      peakInflight: i.inflight?.peak ?? {},
      meanInflight,
      meanInflightMaxOverAvg: maxOverAvg(meanInflight, i.replicas),
    },
    keyed: subset(i.records.filter((r) => r.keyMode !== 'none')),
    keyless: subset(i.records.filter((r) => r.keyMode === 'none')),
    overhead: { p50Ms: i.gateway?.overheadP50Ms ?? null, p99Ms: i.gateway?.overheadP99Ms ?? null, serverTimingP50Ms: ov.n ? ov.p50 : null, serverTimingP99Ms: ov.n ? ov.p99 : null },
    hopsMeanMs,
    perTurn: turns.map((t) => {
      const rows = ok.filter((r) => r.turn === t);
      const p = percentiles(ttftsOf(rows));
      return { turn: t, n: p.n, p50: p.p50, p90: p.p90, hitRate: hitRate(rows) };
    }),
    routes: countBy(ok, (r) => r.route),
  };
}

/** Each session counted once, on the replica that served most of its requests. */
function sessionsPerReplica(ok: readonly TurnRecord[]): Record<string, number> {
  const by = new Map<number, Map<string, number>>();
  for (const r of ok) {
    if (r.replica === null) continue;
    const m = by.get(r.session) ?? new Map<string, number>();
    m.set(r.replica, (m.get(r.replica) ?? 0) + 1);
    by.set(r.session, m);
  }
  const out: Record<string, number> = {};
  for (const m of by.values()) {
    let best = '';
    let n = -1;
    for (const [k, v] of m) if (v > n) { n = v; best = k; }
    out[best] = (out[best] ?? 0) + 1;
  }
  return out;
}
