// A tiny synthetic bench result, hand-made so tests can check goals and the report without a run.

import type { BenchResult } from '../../bench/voice/bench.js';
import type { TurnRecord } from '../../bench/voice/run.js';
import { summarize, type StrategySummary } from '../../bench/voice/summary.js';
import { checkGoals } from '../../bench/voice/goals.js';
import { WORKLOAD_DEFAULTS } from '../../bench/voice/workload.js';

export function record(p: Partial<TurnRecord> & { strategy: string; session: number; turn: number; ttftMs: number }): TurnRecord {
  return {
    group: 0, step: 0, keyMode: 'header', sentMs: p.turn * 1000, totalMs: p.ttftMs + 500, status: 200, ok: true, error: null,
    replica: `r${p.session % 2}`, route: 'pinned', hops: { parse: 0.05, route: 0.02, queue: 0.001, connect: 0.1, upstream_headers: 20 },
    promptTokens: 1000 + 150 * p.turn, cachedTokens: p.turn === 0 ? 0 : 900 + 150 * p.turn, completionTokens: 60, toolCall: false,
    idealCachedTokens: p.turn === 0 ? 0 : 960 + 150 * p.turn,
    ...p,
  };
}

/**
 * Two strategies, 4 sessions (one keyless) × 3 turns; round-robin re-prefills, affinity does not.
 * With `oracle`, a third: no gateway (no route, no hops), warm like affinity and a little faster.
 */
export function syntheticResult(o: { oracle?: boolean } = {}): BenchResult {
  const strategies = o.oracle ? ['round-robin', 'affinity', 'oracle'] : ['round-robin', 'affinity'];
  const records: TurnRecord[] = [];
  for (const strategy of strategies) {
    for (let session = 0; session < 4; session++) {
      for (let turn = 0; turn < 3; turn++) {
        const warm = strategy !== 'round-robin' && turn > 0;
        records.push(record({
          strategy, session, turn, keyMode: session === 3 ? 'none' : 'header',
          ttftMs: (warm ? 60 + session : 400 + 50 * turn + session) - (strategy === 'oracle' ? 10 : 0),
          cachedTokens: warm ? 900 + 150 * turn : 0,
          route: strategy === 'affinity' ? (turn === 0 ? 'placed' : 'pinned') : strategy === 'oracle' ? null : 'random',
          ...(strategy === 'oracle' ? { hops: {} } : {}),
        }));
      }
    }
  }
  const summaries: StrategySummary[] = strategies.map((strategy) => {
    const rows = records.filter((r) => r.strategy === strategy);
    const direct = strategy === 'oracle';
    return summarize({
      strategy, records: rows, durationMs: 5000, truncated: false, replicas: 2, budgetMs: 300,
      counters: { queries: rows.reduce((s, r) => s + (r.promptTokens ?? 0), 0), hits: rows.reduce((s, r) => s + (r.cachedTokens ?? 0), 0) },
      gateway: direct ? null : { overheadP50Ms: 0.2, overheadP99Ms: 0.9, decisions: {} },
      inflight: { peak: { r0: 2, r1: 2 }, mean: { r0: 1, r1: 1 } },
      direct,
    });
  });
  return {
    kind: 'warmroute-voice-bench',
    when: '2025-01-01T00:00:00.000Z',
    machine: { cpus: 2, cpu: 'test <cpu> & "quotes"', node: process.version },
    params: {
      replicas: 2, strategies, outputTokens: [50, 150], maxDurationS: 60, requestTimeoutS: 10, budgetMs: 300, warmup: true,
      workload: { ...WORKLOAD_DEFAULTS, sessions: 4, turns: 3 }, plannedRequests: 12,
    },
    summaries,
    goals: checkGoals(summaries),
    records,
    wallMs: 12_000,
  };
}
