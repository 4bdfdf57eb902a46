import type { ReplicaState } from '../fleet/registry.js';
import type { Metrics } from '../telemetry/metrics.js';
import { errors } from '../errors.js';

/**
 * Per-replica admission: at most `max` requests open on a replica; the rest wait FIFO, up to
 * `timeoutMs`. With max = 0 nothing waits. Owns ReplicaState.inflight (the inflight gauge reads it at scrape time) and the queued gauge.
 */
export interface Admission {
  /** null when admitted at once (the common path: no promise, no await); else a wait. */
  acquire(r: ReplicaState): Promise<void> | null;
  release(r: ReplicaState): void;
  /** A config reload: new limits for the next requests. */
  setLimits(max: number, timeoutMs: number): void;
}

interface Waiter { resolve: () => void; reject: (e: Error) => void; timer: NodeJS.Timeout }

export function createAdmission(max: number, timeoutMs: number, metrics: Metrics): Admission {
  const queues = new Map<string, Waiter[]>();

  function admit(r: ReplicaState) {
    r.inflight++;
  }

  return {
    acquire(r) {
      if (max === 0 || r.inflight < max) {
        admit(r);
        return null;
      }
      let q = queues.get(r.name);
      if (!q) queues.set(r.name, (q = []));
      const queue = q;
      return new Promise<void>((resolve, reject) => {
        const w: Waiter = {
          resolve,
          reject,
          timer: setTimeout(() => {
            queue.splice(queue.indexOf(w), 1);
            metrics.queued.set({ replica: r.name }, queue.length);
            reject(errors.queueTimeout([timeoutMs, r.name]));
          }, timeoutMs),
        };
        queue.push(w);
        metrics.queued.set({ replica: r.name }, queue.length);
      });
    },
    setLimits(m, t) {
      max = m;
      timeoutMs = t;
    },
    release(r) {
      r.inflight--;
      const q = queues.get(r.name);
      const next = q?.shift();
      if (next) {
        clearTimeout(next.timer);
        metrics.queued.set({ replica: r.name }, q!.length);
        admit(r);
        next.resolve();
      }
    },
  };
}
