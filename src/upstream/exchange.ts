import type { ServerResponse } from 'node:http';
import type { ReplicaState } from '../fleet/registry.js';
import type { Admission } from '../queue/admission.js';
import type { Limiter, Prefill } from '../queue/limiter.js';
import { ClientGone } from './failures.js';

/** A count of open requests that something limits (an API key's `open`). */
export interface CountedSlot { open: number }

/**
 * The one owner of everything a client exchange holds: its API key's slot, the gateway-wide slot,
 * its replica's admission slot (and with it the replica's in-flight count), the upstream request
 * and the stalled-client timer. Each stage that takes one hands it here at once; `end` gives every
 * one of them back exactly once, whichever way the exchange ended, and is the only place that does
 * (besides `releaseReplica`, for an attempt that is over while the exchange goes on).
 * A stage that is granted a slot after the exchange ended (a queue wait that resolved late) gets
 * `false` and the slot goes straight back.
 */
export interface ExchangeOwner<E> {
  readonly res: ServerResponse;
  readonly ended: boolean;
  /** An API key's slot: counted now, given back at the end. */
  holdKey(key: CountedSlot): void;
  /** The gateway-wide slot was granted (limits.maxConcurrent). */
  holdGlobal(): boolean;
  /**
   * The replica's admission slot was granted (limits.maxInflightPerReplica; its in-flight count),
   * with the prefill it was admitted with (limits.batchPrefillPerReplica), held until `prefilled`.
   */
  holdReplica(r: ReplicaState, prefill?: Prefill): boolean;
  /** The held replica sent the first token: the prefill it was admitted with is over. */
  prefilled(): void;
  /** The attempt on the held replica is over before the exchange is (failover, resume). */
  releaseReplica(): void;
  /** How to give up the queue wait under way (limits.maxConcurrent or a replica's); null once it is over. */
  waiting(cancel: (() => void) | null): void;
  /** How to abort the upstream request open now; null once it has ended by itself. */
  upstream(abort: ((e: Error) => void) | null): void;
  /** Starts (f) or stops (null) the stalled-client timer: `f` runs once the client has read nothing for `ms`. */
  stall(ms: number, f: (() => void) | null): void;
  /** What ends the exchange if its client goes away now: set by the stage that has it. */
  onClientGone(f: () => void): void;
  /** Releases everything held, then reports `ended` once; false when the exchange had already ended. */
  end(ended: E): boolean;
  /** Settles when the exchange has ended (the drain waits on it). */
  readonly done: Promise<void>;
}

export interface ExchangeOwnerDeps<E> {
  readonly admission: Admission;
  readonly global: Limiter;
  /** Once per exchange, after every slot was given back: the access line and the router's feedback. Should not throw; if it does, `done` still settles. */
  readonly report: (ended: E) => void;
  /** The client went before the exchange ended and no stage set its own handling: how it is reported. */
  readonly aborted: () => E;
  /** The client went before the exchange ended (the client-abort counter). */
  readonly clientGone: (replica: string | null) => void;
}

export function createExchangeOwner<E>(res: ServerResponse, deps: ExchangeOwnerDeps<E>): ExchangeOwner<E> {
  let ended = false;
  let key: CountedSlot | null = null;
  let global = false;
  let replica: ReplicaState | null = null;
  let prefill: Prefill = null;
  let abortUpstream: ((e: Error) => void) | null = null;
  let cancelWait: (() => void) | null = null;
  let stallTimer: NodeJS.Timeout | null = null;
  let gone: (() => void) | null = null;
  let resolveDone!: () => void;
  const done = new Promise<void>((r) => { resolveDone = r; });

  const self: ExchangeOwner<E> = {
    res,
    get ended() { return ended; },
    holdKey(k) {
      k.open++;
      key = k;
    },
    holdGlobal() {
      if (ended) { deps.global.release(); return false; }
      global = true;
      return true;
    },
    holdReplica(r, p = null) {
      if (ended) { deps.admission.release(r, p); return false; }
      self.releaseReplica();
      replica = r;
      prefill = p;
      return true;
    },
    prefilled() {
      if (replica === null || prefill === null) return;
      const p = prefill;
      prefill = null;
      deps.admission.prefilled(replica, p);
    },
    releaseReplica() {
      if (replica === null) return;
      const r = replica;
      const p = prefill;
      replica = null;
      prefill = null;
      deps.admission.release(r, p);
    },
    waiting(cancel) { cancelWait = ended ? null : cancel; },
    upstream(abort) { abortUpstream = ended ? null : abort; },
    stall(ms, f) {
      if (stallTimer !== null) { clearTimeout(stallTimer); stallTimer = null; }
      if (f !== null && !ended) stallTimer = setTimeout(f, ms);
    },
    onClientGone(f) { gone = f; },
    end(e) {
      if (ended) return false;
      ended = true;
      if (stallTimer !== null) { clearTimeout(stallTimer); stallTimer = null; }
      const abort = abortUpstream;
      abortUpstream = null;
      gone = null;
      const cancel = cancelWait;
      cancelWait = null;
      cancel?.();
      // The upstream request is still open only when the exchange ended before its response did.
      abort?.(new ClientGone('the exchange ended before its response'));
      self.releaseReplica();
      if (global) { global = false; deps.global.release(); }
      if (key !== null) { key.open--; key = null; }
      // Every slot is back already; a report that throws must not also keep the drain waiting on
      // an exchange that is over.
      try {
        deps.report(e);
      } finally {
        resolveDone();
      }
      return true;
    },
    done,
  };

  res.on('close', () => {
    if (ended || res.writableFinished) return;
    deps.clientGone(replica?.name ?? null);
    const f = gone;
    if (f !== null) f();
    if (!ended) self.end(deps.aborted());
  });
  return self;
}
