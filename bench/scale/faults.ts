// Faults at scale, injected into a socket row mid-run: one gateway pod killed (SIGKILL to its
// process group; its URL is taken out of the client's choice at the same moment, as a Service
// drops an endpoint whose pod is gone), or the shared redis-server restarted empty. Read from the
// run's records: which requests failed (only those in flight at the kill may), and how long
// placement took to agree again: the last time after the fault that a keyed session's request
// landed on another replica than its previous one.

import type { TurnRecord } from '../voice/run.js';
import type { FaultContext } from './socket.js';

export const FAULTS = ['pod-kill', 'redis-restart'] as const;
export type FaultKind = (typeof FAULTS)[number];

export function injectFault(kind: FaultKind): (ctx: FaultContext) => Promise<void> {
  return async (ctx) => {
    if (kind === 'redis-restart') {
      if (ctx.redis === null) throw new Error('redis-restart needs gateways sharing a redis-server');
      await ctx.redis.restart();
      return;
    }
    const victim = ctx.gateways[ctx.gateways.length - 1];
    if (ctx.gateways.length < 2 || victim.pid === null) throw new Error('pod-kill needs at least two gateway pods');
    ctx.urls.splice(ctx.urls.indexOf(victim.url), 1);
    try {
      process.kill(-victim.pid, 'SIGKILL');
    } catch {
      process.kill(victim.pid, 'SIGKILL');
    }
  };
}

export interface FaultOutcome {
  fault: FaultKind;
  replicas: number;
  pods: number;
  sessions: number;
  requests: number;
  /** ms after the run started. */
  atMs: number;
  failed: number;
  /** Requests open (on any pod) at the fault's moment: the bound on what may fail. */
  inFlightAtFault: number;
  /** Failed requests that were not in flight at the fault: 0 when the gateway is right. */
  failedOutsideFault: number;
  /** Keyed sessions' requests that changed replica, before and after the fault. */
  movesBefore: number;
  movesAfter: number;
  /** Last such move after the fault, ms after it; 0 when none. */
  agreeAfterMs: number;
  hitRate: number;
  ttftP90Ms: number;
}

export function faultOutcome(kind: FaultKind, records: readonly TurnRecord[], atMs: number, base: Pick<FaultOutcome, 'replicas' | 'pods' | 'sessions' | 'hitRate' | 'ttftP90Ms'>): FaultOutcome {
  const open = (r: TurnRecord) => r.sentMs <= atMs && r.sentMs + r.totalMs >= atMs;
  const failed = records.filter((r) => !r.ok);
  const last = new Map<number, string>();
  let movesBefore = 0;
  let movesAfter = 0;
  let lastMove = 0;
  for (const r of [...records].sort((a, b) => a.sentMs - b.sentMs)) {
    if (!r.ok || r.keyMode === 'none' || r.replica === null) continue;
    const prev = last.get(r.session);
    last.set(r.session, r.replica);
    if (prev === undefined || prev === r.replica) continue;
    if (r.sentMs < atMs) movesBefore++;
    else {
      movesAfter++;
      lastMove = Math.max(lastMove, r.sentMs - atMs);
    }
  }
  return {
    fault: kind, ...base, requests: records.length, atMs, failed: failed.length,
    inFlightAtFault: records.filter(open).length, failedOutsideFault: failed.filter((r) => !open(r)).length,
    movesBefore, movesAfter, agreeAfterMs: lastMove,
  };
}
