import { hash64 } from './hash.js';
import type { ReplicaView } from './types.js';

const TWO_POW_53 = 2 ** 53;

/**
 * Weighted rendezvous (highest-random-weight) score of `key` on `replica`:
 * w / −ln(u) with u uniform in (0,1) from xxhash64(key, replica). Removing a replica moves only
 * the keys it owned; every gateway computes the same order with no shared state.
 */
export function rendezvousScore(key: string, replica: ReplicaView): number {
  const h = hash64(replica.name, hash64(key));
  const u = (Number(h >> 11n) + 0.5) / TWO_POW_53;
  return replica.weight / -Math.log(u);
}

/** Replicas in rendezvous order for `key`, best first. */
export function rendezvousRank<R extends ReplicaView>(key: string, replicas: readonly R[]): R[] {
  const scored = replicas.map((r) => ({ r, s: rendezvousScore(key, r) }));
  scored.sort((a, b) => b.s - a.s);
  return scored.map((x) => x.r);
}
