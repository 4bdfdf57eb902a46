// The strategies compared on the same requests: those every strategy served. A run cut by its
// duration cap serves fewer turns, and the ones it misses are its slowest (the later turns, with
// the longest history, queued behind re-prefills); percentiles over different sets flatter it.

import { percentiles } from '../lib/percentiles.js';
import type { TurnRecord } from '../voice/run.js';

export interface SameTurns {
  /** Requests (session, turn, step) that every strategy served with a first token. */
  common: number;
  byStrategy: { strategy: string; p50: number; p90: number; p99: number }[];
}

const keyOf = (r: TurnRecord) => `${r.session}:${r.turn}:${r.step}`;

export function sameTurns(records: readonly TurnRecord[], strategies: readonly string[]): SameTurns {
  const served = (s: string) => new Set(records.filter((r) => r.strategy === s && r.ok && r.ttftMs !== null).map(keyOf));
  const sets = strategies.map(served);
  const common = sets.length === 0 ? new Set<string>() : new Set([...sets[0]].filter((k) => sets.every((set) => set.has(k))));
  return {
    common: common.size,
    byStrategy: strategies.map((strategy) => {
      const p = percentiles(records.filter((r) => r.strategy === strategy && r.ok && r.ttftMs !== null && common.has(keyOf(r))).map((r) => r.ttftMs as number));
      return { strategy, p50: p.p50, p90: p.p90, p99: p.p99 };
    }),
  };
}
