import { errors, type WarmrouteError } from '../errors.js';

/** Why a request was not admitted: a bounded metric label once prefixed with where (global, replica). */
export type ShedCause = 'queue_full' | 'queue_timeout' | 'deadline';

export class Shed extends Error {
  constructor(override readonly cause: ShedCause, readonly error: WarmrouteError) { super(error.message); }
}

/**
 * A request's place in a queue (queue/priority.ts): interactive before batch, then the earliest
 * deadline, then arrival. Without one a request is interactive with no deadline.
 */
export interface QueuePlace {
  readonly batch: boolean;
  /** performance.now() ms by which its first token is due; Infinity when none. */
  readonly deadline: number;
  /** The request's TTFT budget in ms (for the refusal's message); 0 when none. */
  readonly budgetMs: number;
  /** An interactive request still queued at its deadline is refused then (priority.answerLate false). */
  readonly expireAtDeadline: boolean;
}

const INTERACTIVE: QueuePlace = Object.freeze({ batch: false, deadline: Infinity, budgetMs: 0, expireAtDeadline: false });

/**
 * A holder whose prefill the limiter follows (limits.batchPrefillPerReplica): a streamed request
 * from its admission to its first token, by class; null for one it does not (unstreamed, whose
 * first token the gateway sees only at the end).
 */
export type Prefill = 'batch' | 'interactive' | null;

/** What a streamed request of this place counts as while it awaits its first token. */
export const prefillOf = (place: QueuePlace | undefined, streamed: boolean): Prefill => (!streamed ? null : place?.batch ? 'batch' : 'interactive');

/**
 * At most `max` holders at once; up to `maxQueued` more wait, each at most `timeoutMs`. Nothing
 * here grows beyond those two numbers. `max` 0 means no limit. The queue is served interactive
 * first, by deadline within a class; `reserved` of the `max` slots are interactive only, and a full
 * queue makes room for an interactive arrival by shedding its latest batch waiter.
 */
export interface Limiter {
  /**
   * null when admitted at once (no promise on the common path); a wait otherwise; throws Shed when
   * the queue is full. `prefill`: the holder awaits its first token until `prefilled` or `release`.
   */
  acquire(place?: QueuePlace, prefill?: Prefill): Promise<void> | null;
  /** A holder admitted with `prefill` had its first token. */
  prefilled(prefill: Prefill): void;
  /** A holder gives its slot back; `prefill` when it never had its first token. */
  release(prefill?: Prefill): void;
  /**
   * A config reload: new bounds at once. Waiters a higher limit lets in go at once; under a lower
   * one, released slots go to waiters only once fewer than the new limit are open.
   */
  configure(o: LimiterOptions): void;
  /**
   * Shutdown: every waiter is refused with `error` now, and so is any later request that would
   * have to wait (one that fits still goes through).
   */
  closeQueue(error: Error): void;
  /** A wait `acquire` returned is given up (its client left): its place in the queue goes at once. */
  cancel(wait: Promise<void>): void;
  readonly open: number;
  readonly queued: number;
}

export interface LimiterOptions {
  max: number;
  maxQueued: number;
  timeoutMs: number;
  what: string;
  /** Slots of `max` only interactive requests may take (limits.reservedInteractiveShare); 0 by default. */
  reserved?: number;
  /**
   * limits.batchPrefillPerReplica: at most this many streamed batch holders await their first token
   * at once, and no batch request is admitted while an interactive holder awaits its own; 0 (the
   * default) turns the gate off.
   */
  batchPrefill?: number;
  /**
   * With batchPrefill on: no batch request is admitted while an interactive holder awaits its
   * first token (true, the default); false leaves only the bound of `batchPrefill`.
   */
  holdForInteractive?: boolean;
  /** A batch request waits with slots free, for the prefill gate alone (a metric). */
  onPrefillWait?: () => void;
}

interface Waiter { resolve: () => void; reject: (e: Error) => void; timer: NodeJS.Timeout; wait: Promise<void> | null; place: QueuePlace; prefill: Prefill; seq: number }

/** Retry-After for a refusal: the queue wait rounded up to seconds, at least 1. */
export function retryAfterSeconds(timeoutMs: number): string {
  return String(Math.max(1, Math.ceil(timeoutMs / 1000)));
}

/** Whether `a` is served before `b`. */
const before = (a: Waiter, b: Waiter) =>
  a.place.batch !== b.place.batch ? !a.place.batch : a.place.deadline !== b.place.deadline ? a.place.deadline < b.place.deadline : a.seq < b.seq;

export function createLimiter(initial: LimiterOptions): Limiter {
  let opts = initial;
  let open = 0;
  let seq = 0;
  const queue: Waiter[] = [];
  let retryAfter = ['retry-after', retryAfterSeconds(opts.timeoutMs)];
  let closedWith: Error | null = null;
  const prefilling = { batch: 0, interactive: 0 };
  const reserved = () => (opts.max === 0 ? 0 : Math.min(opts.reserved ?? 0, opts.max - 1));
  // A batch prefill shares the replica's engine steps with every prefill beside it: while a
  // caller's turn awaits its first token none is let in, and only so many at once otherwise.
  const gateOpen = (p: QueuePlace, prefill: Prefill) => {
    const k = opts.batchPrefill ?? 0;
    const held = opts.holdForInteractive !== false && prefilling.interactive > 0;
    return !p.batch || k === 0 || (!held && (prefill === null || prefilling.batch < k));
  };
  const slotFree = (p: QueuePlace) => opts.max === 0 || open < opts.max - (p.batch ? reserved() : 0);
  const fits = (p: QueuePlace, prefill: Prefill) => slotFree(p) && gateOpen(p, prefill);
  const take = (prefill: Prefill) => {
    open++;
    if (prefill !== null) prefilling[prefill]++;
  };
  const done = (prefill: Prefill) => {
    if (prefill !== null) prefilling[prefill]--;
  };
  /** The waiter served next among those its class lets in now; -1 when none. */
  const nextIndex = () => {
    let best = -1;
    for (let i = 0; i < queue.length; i++) {
      if (!fits(queue[i].place, queue[i].prefill)) continue;
      if (best < 0 || before(queue[i], queue[best])) best = i;
    }
    return best;
  };
  const admitWaiting = () => {
    for (let i = nextIndex(); i >= 0; i = nextIndex()) {
      const [next] = queue.splice(i, 1);
      clearTimeout(next.timer);
      take(next.prefill);
      next.resolve();
    }
  };
  /** The batch waiter served last, to shed for an interactive arrival; -1 when none. */
  const lastBatch = () => {
    let worst = -1;
    for (let i = 0; i < queue.length; i++) if (queue[i].place.batch && (worst < 0 || before(queue[worst], queue[i]))) worst = i;
    return worst;
  };
  const drop = (w: Waiter) => {
    const i = queue.indexOf(w);
    if (i >= 0) queue.splice(i, 1);
  };
  return {
    configure(o) {
      opts = o;
      retryAfter = ['retry-after', retryAfterSeconds(o.timeoutMs)];
      admitWaiting();
    },
    closeQueue(error) {
      closedWith = error;
      for (const w of queue.splice(0)) {
        clearTimeout(w.timer);
        w.reject(error);
      }
    },
    acquire(place = INTERACTIVE, prefill = null) {
      if (fits(place, prefill)) {
        take(prefill);
        return null;
      }
      if (closedWith !== null) throw closedWith;
      if (queue.length >= opts.maxQueued) {
        const victim = place.batch ? -1 : lastBatch();
        if (victim < 0) throw new Shed('queue_full', errors.overloaded([`${opts.what}: ${open} in flight and ${queue.length} waiting`], null, undefined, retryAfter));
        const [w] = queue.splice(victim, 1);
        clearTimeout(w.timer);
        w.reject(new Shed('queue_full', errors.shedForInteractive([opts.what], null, undefined, retryAfter)));
      }
      if (slotFree(place)) opts.onPrefillWait?.();
      const now = performance.now();
      const untilDeadline = place.expireAtDeadline && !place.batch ? place.deadline - now : Infinity;
      const byDeadline = untilDeadline < opts.timeoutMs;
      let w!: Waiter;
      const wait = new Promise<void>((resolve, reject) => {
        w = {
          resolve,
          reject,
          wait: null,
          place,
          prefill,
          seq: seq++,
          timer: setTimeout(() => {
            drop(w);
            reject(byDeadline
              ? new Shed('deadline', errors.deadlinePassed([place.budgetMs, opts.what], null, undefined, retryAfter))
              : new Shed('queue_timeout', errors.queueTimeout([opts.timeoutMs, opts.what], null, undefined, retryAfter)));
          }, Math.max(0, byDeadline ? untilDeadline : opts.timeoutMs)),
        };
        queue.push(w);
      });
      w.wait = wait;
      return wait;
    },
    cancel(wait) {
      const i = queue.findIndex((w) => w.wait === wait);
      if (i < 0) return;
      clearTimeout(queue[i].timer);
      queue.splice(i, 1);
    },
    prefilled(prefill) {
      if (prefill === null) return;
      done(prefill);
      admitWaiting();
    },
    release(prefill = null) {
      open--;
      done(prefill);
      admitWaiting();
    },
    get open() { return open; },
    get queued() { return queue.length; },
  };
}
