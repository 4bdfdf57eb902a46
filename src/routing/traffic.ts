import { weightOf } from './load.js';
import type { ReplicaView } from './types.js';

/**
 * Each replica's recent count of requests served, decayed exponentially. With voice think time
 * most sessions have no request in flight at any instant, so a bound on in-flight load alone
 * leaves new placements close to random: a replica collects 1.3× its share of sessions before its
 * in-flight count shows it (the voice benchmark measured exactly that). Sessions send requests at
 * similar rates, so the recent request count stands for the sessions a replica carries.
 */
export interface Traffic {
  served(replica: string, now: number): void;
  of(replica: string, now: number): number;
  /**
   * of(replica, now) is raw(replica) × decay(now): a decision reads one decay and a lookup per
   * replica, not an exponential per replica.
   */
  raw(replica: string): number;
  decay(now: number): number;
  /** Σ raw over every replica counted (forget() takes one out): Σ of(r, now) is totalRaw() × decay(now). */
  totalRaw(): number;
  /** Replicas counted. */
  size(): number;
  forget(replica: string): void;
}

// Counts are kept scaled to an epoch, moved forward before the scale passes 2^EPOCH_SPAN.
const EPOCH_SPAN = 512;

export function createTraffic(halfLifeMs: number): Traffic {
  // Each replica's count × 2^((last served − epoch) / half-life): decaying all of them is one factor.
  const scaled = new Map<string, number>();
  let epoch = 0;
  let total = 0;
  const decay = (now: number) => 2 ** (-(now - epoch) / halfLifeMs);
  return {
    served(replica, now) {
      if ((now - epoch) / halfLifeMs > EPOCH_SPAN) {
        const f = decay(now);
        total = 0;
        for (const [k, v] of scaled) {
          scaled.set(k, v * f);
          total += v * f;
        }
        epoch = now;
      }
      const add = 1 / decay(now);
      scaled.set(replica, (scaled.get(replica) ?? 0) + add);
      total += add;
    },
    of: (replica, now) => (scaled.get(replica) ?? 0) * decay(now),
    raw: (replica) => scaled.get(replica) ?? 0,
    decay,
    totalRaw: () => total,
    size: () => scaled.size,
    forget(replica) {
      const v = scaled.get(replica);
      if (v === undefined) return;
      scaled.delete(replica);
      // Summed again rather than subtracted, so that rounding does not build up.
      total = 0;
      for (const x of scaled.values()) total += x;
    },
  };
}

/**
 * Bounded load on recent traffic (Mirrokni–Thorup–Zadimoghaddam, with the decayed request count
 * as the load): which candidates a new placement or a spill may take without passing c × the
 * weighted average once the new session's request is counted.
 */
export function trafficRoom(candidates: readonly ReplicaView[], traffic: Traffic, now: number, loadFactor: number, fleet?: { readonly traffic: number; readonly weight: number }): boolean[] {
  const v = candidates.map((r) => traffic.of(r.name, now));
  // The whole fleet's sums when the candidates are a shortlist of it (shortlist.ts).
  let total = fleet?.traffic ?? 0;
  let weight = fleet?.weight ?? 0;
  if (fleet === undefined) {
    for (let i = 0; i < candidates.length; i++) {
      total += v[i];
      weight += weightOf(candidates[i]);
    }
  }
  return candidates.map((r, i) => v[i] + 1 <= Math.ceil((loadFactor * (total + 1) * weightOf(r)) / weight));
}
