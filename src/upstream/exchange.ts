import type { ServerResponse } from 'node:http';
import type { AdapterHolds } from '../fleet/adapter-loader.js';
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
  /**
   * A LoRA adapter the gateway manages is in use on `replica` by this exchange (it is not unloaded
   * there while held); it follows the exchange to the replica it is admitted to, and is given back
   * at the end. False when the exchange had already ended.
   */
  holdAdapter(replica: string, adapter: string): boolean;
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
}

/**
 * Shared by every exchange of a pipeline (one object, not one per request); `ctx` is the
 * exchange's own, handed back to `report`.
 */
export interface ExchangeOwnerDeps<E, C = void> {
  readonly admission: Admission;
  readonly global: Limiter;
  /** Once per exchange, after every slot was given back: the access line and the router's feedback. Should not throw; if it does, `settled` is still called. */
  readonly report: (ended: E, ctx: C) => void;
  /** Once per exchange, after `report` (even if it threw): the drain's count of open exchanges. */
  readonly settled?: () => void;
  /** The client went before the exchange ended and no stage set its own handling: how it is reported. */
  readonly aborted: () => E;
  /** The client went before the exchange ended (the client-abort counter). */
  readonly clientGone: (replica: string | null) => void;
  /** Adapters in use per replica (fleet/adapter-loader.ts), when the gateway manages adapters. */
  readonly adapters?: AdapterHolds;
}

/**
 * One object per exchange, its methods on the prototype: a dozen closures per request (one per
 * method, and the state they shared) were ~1.8 KB of garbage each (docs/design-notes.md).
 */
class Owner<E, C> implements ExchangeOwner<E> {
  ended = false;
  private key: CountedSlot | null = null;
  private global = false;
  private replica: ReplicaState | null = null;
  private prefill: Prefill = null;
  private abortUpstream: ((e: Error) => void) | null = null;
  private cancelWait: (() => void) | null = null;
  private stallTimer: NodeJS.Timeout | null = null;
  private gone: (() => void) | null = null;
  private adapter: string | null = null;
  private adapterAt: string | null = null;

  constructor(readonly res: ServerResponse, private readonly deps: ExchangeOwnerDeps<E, C>, private readonly ctx: C) {
    res.on('close', () => this.closed());
  }

  holdKey(k: CountedSlot): void {
    k.open++;
    this.key = k;
  }

  holdGlobal(): boolean {
    if (this.ended) { this.deps.global.release(); return false; }
    this.global = true;
    return true;
  }

  holdAdapter(replica: string, adapter: string): boolean {
    const holds = this.deps.adapters;
    if (this.ended || holds === undefined) return false;
    this.releaseAdapter();
    holds.hold(replica, adapter);
    this.adapter = adapter;
    this.adapterAt = replica;
    return true;
  }

  private releaseAdapter(): void {
    if (this.adapter === null) return;
    const a = this.adapter;
    const at = this.adapterAt!;
    this.adapter = null;
    this.adapterAt = null;
    this.deps.adapters!.release(at, a);
  }

  holdReplica(r: ReplicaState, p: Prefill = null): boolean {
    if (this.ended) { this.deps.admission.release(r, p); return false; }
    // A failover takes the adapter's hold to the replica that serves the exchange now.
    if (this.adapter !== null && this.adapterAt !== r.name) this.holdAdapter(r.name, this.adapter);
    this.releaseReplica();
    this.replica = r;
    this.prefill = p;
    return true;
  }

  prefilled(): void {
    if (this.replica === null || this.prefill === null) return;
    const p = this.prefill;
    this.prefill = null;
    this.deps.admission.prefilled(this.replica, p);
  }

  releaseReplica(): void {
    if (this.replica === null) return;
    const r = this.replica;
    const p = this.prefill;
    this.replica = null;
    this.prefill = null;
    this.deps.admission.release(r, p);
  }

  waiting(cancel: (() => void) | null): void { this.cancelWait = this.ended ? null : cancel; }
  upstream(abort: ((e: Error) => void) | null): void { this.abortUpstream = this.ended ? null : abort; }

  stall(ms: number, f: (() => void) | null): void {
    if (this.stallTimer !== null) { clearTimeout(this.stallTimer); this.stallTimer = null; }
    if (f !== null && !this.ended) this.stallTimer = setTimeout(f, ms);
  }

  onClientGone(f: () => void): void { this.gone = f; }

  end(e: E): boolean {
    if (this.ended) return false;
    this.ended = true;
    if (this.stallTimer !== null) { clearTimeout(this.stallTimer); this.stallTimer = null; }
    const abort = this.abortUpstream;
    this.abortUpstream = null;
    this.gone = null;
    const cancel = this.cancelWait;
    this.cancelWait = null;
    cancel?.();
    // The upstream request is still open only when the exchange ended before its response did.
    abort?.(new ClientGone('the exchange ended before its response'));
    this.releaseReplica();
    this.releaseAdapter();
    if (this.global) { this.global = false; this.deps.global.release(); }
    if (this.key !== null) { this.key.open--; this.key = null; }
    // Every slot is back already; a report that throws must not also keep the drain waiting on
    // an exchange that is over.
    try {
      this.deps.report(e, this.ctx);
    } finally {
      this.deps.settled?.();
    }
    return true;
  }

  /** The client's side closed: before the exchange ended, the client went away. */
  private closed(): void {
    if (this.ended || this.res.writableFinished) return;
    this.deps.clientGone(this.replica?.name ?? null);
    const f = this.gone;
    if (f !== null) f();
    if (!this.ended) this.end(this.deps.aborted());
  }
}

export function createExchangeOwner<E, C = void>(res: ServerResponse, deps: ExchangeOwnerDeps<E, C>, ctx: C): ExchangeOwner<E> {
  return new Owner(res, deps, ctx);
}
