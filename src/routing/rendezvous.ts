import { hash64 } from '../identify/hash.js';
import type { ReplicaView } from './types.js';

const TWO_POW_53 = 2 ** 53;

/** Score of a replica for an already-hashed key (the key is hashed once per ranking, not per replica). */
function scoreHashed(keyHash: bigint, replica: ReplicaView): number {
  const h = hash64(replica.name, keyHash);
  const u = (Number(h >> 11n) + 0.5) / TWO_POW_53;
  return replica.weight / -Math.log(u);
}

/**
 * Replicas in weighted rendezvous (highest-random-weight) order for `key`, best first: the score
 * of a replica is w / −ln(u), u uniform in (0,1) from xxhash64(key, replica). Removing a replica
 * moves only the keys it owned; every gateway computes the same order with no shared state.
 */
export function rendezvousRank<R extends ReplicaView>(key: string, replicas: readonly R[]): R[] {
  const k = hash64(key);
  const scored = replicas.map((r) => ({ r, s: scoreHashed(k, r) }));
  scored.sort((a, b) => b.s - a.s);
  return scored.map((x) => x.r);
}
