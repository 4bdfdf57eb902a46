import { errors, type WarmrouteError } from '../errors.js';

/** Why a request was not admitted: a bounded metric label once prefixed with where (global, replica). */
export type ShedCause = 'queue_full' | 'queue_timeout';

export class Shed extends Error {
  constructor(override readonly cause: ShedCause, readonly error: WarmrouteError) { super(error.message); }
}

/**
 * At most `max` holders at once; up to `maxQueued` more wait in arrival order, each at most
 * `timeoutMs`. Nothing here grows beyond those two numbers. `max` 0 means no limit.
 */
export interface Limiter {
  /** null when admitted at once (no promise on the common path); a wait otherwise; throws Shed when the queue is full. */
  acquire(): Promise<void> | null;
  release(): void;
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

export interface LimiterOptions { max: number; maxQueued: number; timeoutMs: number; what: string }

interface Waiter { resolve: () => void; reject: (e: Error) => void; timer: NodeJS.Timeout; wait: Promise<void> | null }

/** Retry-After for a refusal: the queue wait rounded up to seconds, at least 1. */
export function retryAfterSeconds(timeoutMs: number): string {
  return String(Math.max(1, Math.ceil(timeoutMs / 1000)));
}

export function createLimiter(initial: LimiterOptions): Limiter {
  let opts = initial;
  let open = 0;
  const queue: Waiter[] = [];
  let retryAfter = ['retry-after', retryAfterSeconds(opts.timeoutMs)];
  let closedWith: Error | null = null;
  const admitWaiting = () => {
    while (queue.length > 0 && (opts.max === 0 || open < opts.max)) {
      const next = queue.shift()!;
      clearTimeout(next.timer);
      open++;
      next.resolve();
    }
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
    acquire() {
      if (opts.max === 0 || open < opts.max) {
        open++;
        return null;
      }
      if (closedWith !== null) throw closedWith;
      if (queue.length >= opts.maxQueued) {
        throw new Shed('queue_full', errors.overloaded([`${opts.what}: ${open} in flight and ${queue.length} waiting`], null, undefined, retryAfter));
      }
      let w!: Waiter;
      const wait = new Promise<void>((resolve, reject) => {
        w = {
          resolve,
          reject,
          wait: null,
          timer: setTimeout(() => {
            queue.splice(queue.indexOf(w), 1);
            reject(new Shed('queue_timeout', errors.queueTimeout([opts.timeoutMs, opts.what], null, undefined, retryAfter)));
          }, opts.timeoutMs),
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
    release() {
      open--;
      admitWaiting();
    },
    get open() { return open; },
    get queued() { return queue.length; },
  };
}
