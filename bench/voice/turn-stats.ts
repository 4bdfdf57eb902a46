// Per caller turn, next to per request: the client's measurement of each turn (first request sent
// → first content of its last call that produced content; canned turns wait ~0), the gateway's
// measurement of the same turns (GET /admin/sessions/{key}, record/turns.ts), and the
// distributions the field report asks for: mean, median, p90, p99 and turns over budget.

import type { ClientTurn } from './orchestrated.js';
import type { TurnRecord } from './run.js';
import { mean, percentiles, type Percentiles } from './stats.js';


export interface Distribution extends Percentiles {
  mean: number | null;
  overBudget: number;
}

export interface TurnsSummary {
  turns: number;
  canned: number;
  callsP50: number;
  callsP90: number;
  overlappedTurns: number;
  perRequest: Distribution;
  perTurn: Distribution;
  /** The gateway's own figures for the turns that reached it, against the client's for the same turns. */
  gateway: { matched: number; callsAgree: number; clientP50: number; gatewayP50: number; p50DiffMs: number; medianAbsDiffMs: number } | null;
}

export function distribution(values: readonly number[], budgetMs: number): Distribution {
  return { ...percentiles(values), mean: mean(values), overBudget: values.filter((v) => v > budgetMs).length };
}

export function summarizeTurns(turns: readonly ClientTurn[], records: readonly TurnRecord[], budgetMs: number): TurnsSummary {
  const ok = turns.filter((t) => t.ok && t.waitMs !== null);
  const calls = percentiles(turns.map((t) => t.calls));
  const matched = ok.filter((t) => t.calls > 0 && t.gatewayWaitMs !== null);
  const diffs = matched.map((t) => Math.abs((t.gatewayWaitMs as number) - (t.waitMs as number)));
  const cp = percentiles(matched.map((t) => t.waitMs as number));
  const gp = percentiles(matched.map((t) => t.gatewayWaitMs as number));
  return {
    turns: turns.length,
    canned: turns.filter((t) => t.calls === 0).length,
    callsP50: calls.p50,
    callsP90: calls.p90,
    overlappedTurns: turns.filter((t) => t.overlapped).length,
    perRequest: distribution(records.filter((r) => r.ok && r.ttftMs !== null).map((r) => r.ttftMs as number), budgetMs),
    perTurn: distribution(ok.map((t) => t.waitMs as number), budgetMs),
    gateway: matched.length === 0 ? null : {
      matched: matched.length,
      callsAgree: matched.filter((t) => t.gatewayCalls === t.calls).length,
      clientP50: cp.p50,
      gatewayP50: gp.p50,
      p50DiffMs: Math.abs(gp.p50 - cp.p50),
      medianAbsDiffMs: percentiles(diffs).p50,
    },
  };
}


/**
 * A config file for the bench's gateways: every turn of a session kept for the admin view, and
 * turns closed a little after the longest think time (the last one of each session by the idle bound).
 */
export function turnsConfig(thinkMaxMs: number, budgetMs: number): Record<string, unknown> {
  return { turns: { keep: 1000, idleMs: Math.ceil(thinkMaxMs + 1000), budgetMs: Math.ceil(budgetMs) } };
}

interface AdminTurns { turns: { open: unknown; last: { index: number; calls: number; waitMs: number | null }[] } | null }

/**
 * Reads each session's turns from the gateway once every session's last turn has closed (bounded
 * wait), and puts them beside the client's: the gateway's turn i is the client's i-th turn that
 * made a call (canned turns never reach it).
 */
export async function attachGatewayTurns(adminUrl: string, turns: ClientTurn[], maxWaitMs: number): Promise<void> {
  const bySession = new Map<number, ClientTurn[]>();
  for (const t of turns) {
    if (t.calls === 0 || t.adminKey === null) continue;
    let list = bySession.get(t.session);
    if (!list) bySession.set(t.session, (list = []));
    list.push(t);
  }
  const deadline = performance.now() + maxWaitMs;
  for (const list of bySession.values()) {
    list.sort((a, b) => a.turn - b.turn);
    let view: AdminTurns | null = null;
    for (;;) {
      // The session's latest key: a keyless conversation's turns go on under its conversation key.
      const res = await fetch(`${adminUrl}/admin/sessions/${encodeURIComponent(list[list.length - 1].adminKey as string)}`);
      view = res.ok ? (await res.json()) as AdminTurns : null;
      if (view?.turns?.open === null || performance.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    const last = view?.turns?.last ?? [];
    for (const [i, t] of list.entries()) {
      const g = last.find((x) => x.index === i);
      t.gatewayWaitMs = g?.waitMs ?? null;
      t.gatewayCalls = g?.calls ?? null;
    }
  }
}

const f = (v: number | null | undefined, d = 0) => (v === null || v === undefined || !Number.isFinite(v) ? '–' : v.toFixed(d));

/** Markdown: per strategy, the per-request TTFT and the per-turn wait side by side. */
export function turnsTable(rows: readonly { label: string; budgetMs: number; turns: TurnsSummary | undefined }[]): string {
  const budget = rows[0]?.budgetMs ?? 250;
  const dist = (d: Distribution) => [f(d.mean), f(d.p50), f(d.p90), f(d.p99), `${d.overBudget} / ${d.n}`];
  const out = [
    `| strategy | per request: mean ms | median | p90 | p99 | > ${budget} ms | per turn: mean ms | median | p90 | p99 | > ${budget} ms | calls per turn p50 / p90 | canned turns | gateway turn wait p50 vs client's, ms |`,
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const r of rows) {
    const t = r.turns;
    if (!t) continue;
    const g = t.gateway;
    out.push(`| ${[r.label, ...dist(t.perRequest), ...dist(t.perTurn), `${f(t.callsP50)} / ${f(t.callsP90)}`, `${t.canned} / ${t.turns}`,
      g ? `${f(g.gatewayP50, 1)} vs ${f(g.clientP50, 1)}; per turn Δ p50 ${f(g.medianAbsDiffMs, 2)} (${g.matched} turns${g.callsAgree === g.matched ? '' : `, calls differ in ${g.matched - g.callsAgree}`})` : '—'].join(' | ')} |`);
  }
  return out.join('\n');
}
