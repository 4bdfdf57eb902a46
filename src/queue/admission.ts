import type { ReplicaState } from '../fleet/registry.js';
import { createLimiter, type Limiter, type Prefill, type QueuePlace } from './limiter.js';

/**
 * Admission per replica: at most limits.maxInflightPerReplica requests open on each, a bounded
 * queue behind it (limits.maxQueuedPerReplica, timeouts.queueMs). Owns ReplicaState.inflight (the
 * inflight gauge reads it at scrape time). One limiter per replica in the fleet: a replica's goes when it leaves.
 */
export interface Admission {
  /**
   * null when admitted at once; a wait otherwise; throws Shed when the replica's queue is full.
   * `prefill` (limiter.ts): the request is followed until its first token (limits.batchPrefillPerReplica).
   */
  acquire(r: ReplicaState, place?: QueuePlace, prefill?: Prefill): Promise<void> | null;
  /** A request admitted with `prefill` had its first token on `r`. */
  prefilled(r: ReplicaState, prefill: Prefill): void;
  /** Its slot back; `prefill` when it never had its first token. */
  release(r: ReplicaState, prefill?: Prefill): void;
  /** A wait `acquire` returned for `r` is given up (its client left). */
  cancel(r: ReplicaState, wait: Promise<void>): void;
  queuedOn(name: string): number;
  /** A config reload: new limits for the next requests. */
  setLimits(limits: AdmissionLimits): void;
  /** A replica left the fleet (it has nothing in flight, or its drain time ran out). */
  forget(name: string): void;
  /** Shutdown: every replica's waiters are refused with `error` now, and so is any later wait (Limiter.closeQueue). */
  closeQueues(error: Error): void;
}

export interface AdmissionLimits {
  maxInflight: number;
  maxQueued: number;
  timeoutMs: number;
  reservedShare?: number;
  /** limits.batchPrefillPerReplica; 0 or omitted: no prefill gate. */
  batchPrefill?: number;
}

/** Interactive-only slots of a limit of `max` (limits.reservedInteractiveShare). */
export const reservedSlots = (max: number, share: number) => Math.round(max * share);

/** `prefillWait`: a batch request waits at replica `name`'s prefill gate alone (warmroute_batch_prefill_waits_total). */
export function createAdmission(initial: AdmissionLimits, prefillWait: (name: string) => void = () => {}): Admission {
  let opts = initial;
  // Keyed by name, and tied to the replica object it was made for: a request that ends after its
  // replica left (drain time ran out) or rejoined under the same name gives its slot back to
  // nothing, rather than to a limiter it never held a slot of.
  const limiters = new Map<string, { replica: ReplicaState; limiter: Limiter }>();
  const optionsFor = (name: string) => ({ max: opts.maxInflight, maxQueued: opts.maxQueued, timeoutMs: opts.timeoutMs, what: `replica ${name}`, reserved: reservedSlots(opts.maxInflight, opts.reservedShare ?? 0), batchPrefill: opts.batchPrefill ?? 0, onPrefillWait: () => prefillWait(name) });
  // The counting wait handed out → the limiter's own wait, so a client that leaves can give its place up.
  const waits = new Map<Promise<void>, Promise<void>>();
  let closedWith: Error | null = null;
  const limiterOf = (r: ReplicaState) => {
    let e = limiters.get(r.name);
    if (e === undefined || e.replica !== r) {
      limiters.set(r.name, (e = { replica: r, limiter: createLimiter(optionsFor(r.name)) }));
      if (closedWith !== null) e.limiter.closeQueue(closedWith);
    }
    return e.limiter;
  };
  return {
    acquire(r, place, prefill) {
      const wait = limiterOf(r).acquire(place, prefill);
      if (wait === null) {
        r.inflight++;
        return null;
      }
      const counted = wait.then(() => { r.inflight++; });
      waits.set(counted, wait);
      void counted.finally(() => waits.delete(counted)).catch(() => {});
      return counted;
    },
    cancel(r, counted) {
      const wait = waits.get(counted);
      if (wait === undefined) return;
      waits.delete(counted);
      const e = limiters.get(r.name);
      if (e?.replica === r) e.limiter.cancel(wait);
    },
    setLimits(limits) {
      opts = limits;
      for (const [name, e] of limiters) e.limiter.configure(optionsFor(name));
    },
    prefilled(r, prefill) {
      const e = limiters.get(r.name);
      if (e?.replica === r) e.limiter.prefilled(prefill);
    },
    release(r, prefill) {
      r.inflight--;
      const e = limiters.get(r.name);
      if (e?.replica === r) e.limiter.release(prefill);
    },
    queuedOn: (name) => limiters.get(name)?.limiter.queued ?? 0,
    forget: (name) => void limiters.delete(name),
    closeQueues(error) {
      closedWith = error;
      for (const e of limiters.values()) e.limiter.closeQueue(error);
    },
  };
}
