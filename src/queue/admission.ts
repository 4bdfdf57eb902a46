import type { ReplicaState } from '../fleet/registry.js';
import { createLimiter, type Limiter } from './limiter.js';

/**
 * Admission per replica: at most limits.maxInflightPerReplica requests open on each, a bounded
 * queue behind it (limits.maxQueuedPerReplica, timeouts.queueMs). Owns ReplicaState.inflight (the
 * inflight gauge reads it at scrape time). One limiter per replica name: bounded by the fleet.
 */
export interface Admission {
  /** null when admitted at once; a wait otherwise; throws Shed when the replica's queue is full. */
  acquire(r: ReplicaState): Promise<void> | null;
  release(r: ReplicaState): void;
  queuedOn(name: string): number;
}

export function createAdmission(opts: { maxInflight: number; maxQueued: number; timeoutMs: number }): Admission {
  const limiters = new Map<string, Limiter>();
  const limiterOf = (r: ReplicaState) => {
    let l = limiters.get(r.name);
    if (l === undefined) limiters.set(r.name, (l = createLimiter({ max: opts.maxInflight, maxQueued: opts.maxQueued, timeoutMs: opts.timeoutMs, what: `replica ${r.name}` })));
    return l;
  };
  return {
    acquire(r) {
      const wait = limiterOf(r).acquire();
      if (wait === null) {
        r.inflight++;
        return null;
      }
      return wait.then(() => { r.inflight++; });
    },
    release(r) {
      r.inflight--;
      limiterOf(r).release();
    },
    queuedOn: (name) => limiters.get(name)?.queued ?? 0,
  };
}
