import { xx } from '../identify/hash.js';
import { weightOf } from './load.js';
import type { ReplicaView } from './types.js';

/**
 * A classic consistent-hash ring (ketama style, as in nginx `hash … consistent`, HAProxy and
 * vLLM production-stack's session router): each replica owns `vnodes × weight` points of a 32-bit
 * circle; a key belongs to the first point clockwise of its hash. No load bound, on purpose: this
 * is the baseline warmroute is measured against.
 *
 * The ring depends only on the candidate set, so it is rebuilt when that set changes and reused
 * otherwise (one rebuild per health change, not per request).
 */
export interface RingRanker {
  /** Candidates in ring order from the key's position: owner first, then the next distinct owners. */
  rank<R extends ReplicaView>(key: string, candidates: readonly R[]): R[];
}

interface Ring {
  readonly signature: string;
  readonly points: Uint32Array;
  /** Index into the candidate list the ring was built from. */
  readonly owners: Int32Array;
}

export function createRingRanker(vnodes: number): RingRanker {
  let ring: Ring | null = null;

  function build(candidates: readonly ReplicaView[], signature: string): Ring {
    const entries: { point: number; owner: number }[] = [];
    candidates.forEach((r, owner) => {
      const n = Math.max(1, Math.round(vnodes * weightOf(r)));
      for (let v = 0; v < n; v++) entries.push({ point: xx.h32(`${r.name}#${v}`), owner });
    });
    // Equal points (rare) are ordered by owner name so every gateway builds the same ring.
    entries.sort((a, b) => a.point - b.point || (candidates[a.owner].name < candidates[b.owner].name ? -1 : 1));
    return {
      signature,
      points: Uint32Array.from(entries, (e) => e.point),
      owners: Int32Array.from(entries, (e) => e.owner),
    };
  }

  return {
    rank<R extends ReplicaView>(key: string, candidates: readonly R[]): R[] {
      let signature = '';
      for (const r of candidates) signature += `${r.name}\u0000${r.weight}\u0000`;
      if (ring === null || ring.signature !== signature) ring = build(candidates, signature);
      const { points, owners } = ring;
      const h = xx.h32(key);
      let lo = 0;
      let hi = points.length;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (points[mid] < h) lo = mid + 1; else hi = mid;
      }
      const out: R[] = [];
      const taken = new Uint8Array(candidates.length);
      for (let k = 0; k < points.length && out.length < candidates.length; k++) {
        const owner = owners[(lo + k) % points.length];
        if (taken[owner] === 0) {
          taken[owner] = 1;
          out.push(candidates[owner]);
        }
      }
      return out;
    },
  };
}
