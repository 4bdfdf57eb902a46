// The oracle placement: no gateway at all; the load generator sends every request of session i
// straight to replica i mod R, chosen before the run. Perfect stickiness with perfectly even
// session counts — the "ideal one-replica-per-session placement" on the fleet at hand — so
// a run can say how far any router could have gone on its workload, not just how far warmroute went.

import type { Direct, TurnRecord } from './run.js';

export const ORACLE = 'oracle';

/** Strategies that run without a gateway: no route reasons, no Server-Timing, no gateway overhead. */
export const viaGateway = (strategy: string) => strategy !== ORACLE;

/**
 * `affinity@3`: warmroute as three gateway processes sharing pins through one redis-server, each
 * request to one at random; 1 for any other strategy. The CLI accepts `affinity@N` only for N ≥ 2.
 */
export const gatewaysOf = (strategy: string): number => Number(/^affinity@(\d+)$/.exec(strategy)?.[1] ?? 1);

/** Session i → replica i mod R. */
export function oraclePlan(sessions: number, replicas: number): number[] {
  if (!(replicas >= 1)) throw new Error(`the oracle needs at least one replica, got ${replicas}`);
  return Array.from({ length: sessions }, (_, i) => i % replicas);
}

/** host:port, as the gateway names an --upstream, so per-replica tables line up across strategies. */
export function replicaName(url: string): string {
  const u = new URL(url);
  return `${u.hostname}:${u.port || (u.protocol === 'https:' ? '443' : '80')}`;
}

export function oracleTargets(sessions: number, urls: readonly string[]): Direct[] {
  return oraclePlan(sessions, urls.length).map((r) => ({ url: urls[r], replica: replicaName(urls[r]) }));
}

/**
 * Peak and mean requests in flight per replica, sampled every `everyMs` from the client's own
 * records: the gateway strategies' figures come from polling the gateway at the same cadence, and
 * with no gateway the client is the only one who knows. Every replica is listed, idle ones at 0.
 */
export function inflightFromRecords(records: readonly TurnRecord[], replicas: readonly string[], durationMs: number, everyMs = 250): { peak: Record<string, number>; mean: Record<string, number> } {
  const peak: Record<string, number> = Object.fromEntries(replicas.map((r) => [r, 0]));
  const sum: Record<string, number> = { ...peak };
  let samples = 0;
  for (let t = 0; t <= durationMs; t += everyMs) {
    samples++;
    const now: Record<string, number> = {};
    for (const r of records) {
      if (r.replica !== null && r.sentMs <= t && t < r.sentMs + r.totalMs) now[r.replica] = (now[r.replica] ?? 0) + 1;
    }
    for (const [name, n] of Object.entries(now)) {
      peak[name] = Math.max(peak[name] ?? 0, n);
      sum[name] = (sum[name] ?? 0) + n;
    }
  }
  const mean = Object.fromEntries(Object.entries(sum).map(([k, v]) => [k, samples ? v / samples : 0]));
  return { peak, mean };
}
