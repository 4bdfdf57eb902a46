// One row of the scale report, for a socket run (real processes, wall time) or a discrete-event
// run (the router's code in virtual time), and the comparisons read across rows.

import { percentiles } from '../lib/percentiles.js';
import { idealHits, type SentRequest } from '../voice/ideal.js';

export type RowKind = 'socket' | 'des';
export type RowStrategy = 'affinity' | 'round-robin' | 'oracle';

export interface ScaleRow {
  kind: RowKind;
  strategy: RowStrategy;
  replicas: number;
  /** Gateway processes (socket) or routers (des) sharing one store; 0 for the oracle (no gateway). */
  pods: number;
  sessions: number;
  kvEvents: boolean;
  requests: number;
  errors: number;
  /** Failed requests by their error's first words (the three most frequent). */
  errorKinds?: Record<string, number>;
  /** The duration cap stopped sessions from starting turns. */
  truncated: boolean;
  /** vLLM prefix-cache hits / queries over the run, every replica together. */
  hitRate: number;
  idealHitRate: number;
  ttftP50Ms: number;
  ttftP90Ms: number;
  ttftP99Ms: number;
  /** p90 over the one-pod row of the same kind, R and S; over the oracle row of the same kind, R and S. */
  p90VsOnePod: number | null;
  p90VsOracle: number | null;
  /** Wall seconds of the run (des: virtual seconds simulated in `wallS`). */
  durationS: number;
  wallS: number;
  socket?: SocketFigures;
  /** DES: CPU ms the routers spent per request in identify(), route() and served(), timed in the run. */
  routerCpuMsPerRequest?: number;
  /** DES: the same calls replayed to fresh routers with no simulator in the process (des/replay.ts). */
  routerReplayCpuMsPerRequest?: number;
}

export interface SocketFigures {
  /** Gateway CPU per request, every pod together, less what the pods spend idle over the same time. */
  cpuMsPerRequest: number;
  cpuMsPerRequestRaw: number;
  /** Idle CPU per pod (stats scrapes, health checks, KV event streams with no traffic). */
  idleCpuMsPerSecond: number;
  rssMbPerPod: number;
  peakRssMbPerPod: number;
  redisCommandsPerRequest: number | null;
  redisMemoryMb: number | null;
  /** KV events read per second per pod, and the blocks one pod tracks at the end. */
  kvEventsPerSecond: number;
  kvBlocksTracked: number;
  /** CPU per second per pod that KV events cost: this row against its twin with events off (null without one). */
  kvEventCpuMsPerSecond: number | null;
}

export interface RunFigures {
  requests: number;
  errors: number;
  errorKinds: Record<string, number>;
  hitRate: number;
  idealHitRate: number;
  ttft: { p50: number; p90: number; p99: number };
}

/** Hit rate, ideal and TTFT percentiles of a run, from its ok requests. */
export function runFigures(records: readonly { ok: boolean; ttftMs: number | null; error?: string | null }[], sent: readonly SentRequest[], counters: { queries: number; hits: number }): RunFigures {
  const okSent = sent.filter((_, i) => records[i].ok);
  const ttfts = records.filter((r) => r.ok && r.ttftMs !== null).map((r) => r.ttftMs as number);
  const p = percentiles(ttfts);
  return {
    requests: records.length,
    errors: records.filter((r) => !r.ok).length,
    errorKinds: errorKinds(records),
    hitRate: counters.queries > 0 ? counters.hits / counters.queries : 0,
    idealHitRate: idealHits(okSent).hitRate,
    ttft: { p50: p.p50, p90: p.p90, p99: p.p99 },
  };
}

function errorKinds(records: readonly { ok: boolean; error?: string | null }[]): Record<string, number> {
  const n = new Map<string, number>();
  for (const r of records) {
    if (r.ok) continue;
    const k = (r.error ?? 'failed').slice(0, 60);
    n.set(k, (n.get(k) ?? 0) + 1);
  }
  return Object.fromEntries([...n.entries()].sort((a, b) => b[1] - a[1]).slice(0, 3));
}

/** Fills p90VsOnePod and p90VsOracle, and each KV-events row's CPU against its events-off twin. */
export function compareRows(rows: ScaleRow[]): void {
  const same = (a: ScaleRow, b: ScaleRow) => a.kind === b.kind && a.replicas === b.replicas && a.sessions === b.sessions;
  for (const r of rows) {
    const one = rows.find((x) => same(x, r) && x.strategy === 'affinity' && x.pods === 1 && x.kvEvents === r.kvEvents);
    const oracle = rows.find((x) => same(x, r) && x.strategy === 'oracle');
    r.p90VsOnePod = r.strategy === 'affinity' && one ? r.ttftP90Ms / one.ttftP90Ms : null;
    r.p90VsOracle = r.strategy !== 'oracle' && oracle ? r.ttftP90Ms / oracle.ttftP90Ms : null;
    if (r.socket && r.kvEvents) {
      const off = rows.find((x) => same(x, r) && x.strategy === r.strategy && x.pods === r.pods && !x.kvEvents && x.socket);
      if (off?.socket) {
        // The CPU per request that events add (idle work apart in both rows, the same requests),
        // per second of this row's run and per pod. Raw rates would mostly compare idle work: it
        // dominates at hundreds of replicas, and the two rows need not last as long.
        r.socket.kvEventCpuMsPerSecond = ((r.socket.cpuMsPerRequest - (off.socket as SocketFigures).cpuMsPerRequest) * r.requests) / r.durationS / r.pods;
      }
    }
  }
}
