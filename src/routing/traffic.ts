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
  forget(replica: string): void;
}

export function createTraffic(halfLifeMs: number): Traffic {
  const state = new Map<string, { v: number; t: number }>();
  const decayed = (s: { v: number; t: number }, now: number) => s.v * 2 ** (-(now - s.t) / halfLifeMs);
  return {
    served(replica, now) {
      const s = state.get(replica);
      if (s === undefined) state.set(replica, { v: 1, t: now });
      else {
        s.v = decayed(s, now) + 1;
        s.t = now;
      }
    },
    of(replica, now) {
      const s = state.get(replica);
      return s === undefined ? 0 : decayed(s, now);
    },
    forget: (replica) => void state.delete(replica),
  };
}

/**
 * Bounded load on recent traffic (Mirrokni–Thorup–Zadimoghaddam, with the decayed request count
 * as the load): which candidates a new placement or a spill may take without passing c × the
 * weighted average once the new session's request is counted.
 */
export function trafficRoom(candidates: readonly ReplicaView[], traffic: Traffic, now: number, loadFactor: number): boolean[] {
  const v = candidates.map((r) => traffic.of(r.name, now));
  let total = 0;
  let weight = 0;
  for (let i = 0; i < candidates.length; i++) {
    total += v[i];
    weight += weightOf(candidates[i]);
  }
  return candidates.map((r, i) => v[i] + 1 <= Math.ceil((loadFactor * (total + 1) * weightOf(r)) / weight));
}
