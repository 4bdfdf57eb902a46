// Virtual time for the discrete-event run: a min-heap of timers, run in time order (FIFO among
// equal times), with no waiting. It satisfies the simulator engine's clock (bench/sim/engine.ts),
// so the same scheduler that serves HTTP in a socket run steps here in virtual milliseconds.

import type { EngineClock } from '../../sim/engine.js';

interface Timer {
  at: number;
  order: number;
  fn: () => void;
  cancelled: boolean;
}

export interface VirtualClock extends EngineClock {
  /**
   * Runs timers in order until none is left, the next is past `untilMs`, or `stop()` says so
   * (asked every 1,024 timers); returns timers run.
   */
  run(untilMs: number, stop?: () => boolean): number;
  /** Runs the next timer due by `untilMs`, if any: false when none is (for a caller that awaits between timers). */
  step(untilMs: number): boolean;
  pending(): number;
}

export function createVirtualClock(): VirtualClock {
  const heap: Timer[] = [];
  let now = 0;
  let order = 0;
  const less = (a: Timer, b: Timer) => a.at < b.at || (a.at === b.at && a.order < b.order);
  const push = (t: Timer) => {
    heap.push(t);
    let i = heap.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!less(heap[i], heap[p])) break;
      [heap[i], heap[p]] = [heap[p], heap[i]];
      i = p;
    }
  };
  const pop = (): Timer => {
    const top = heap[0];
    const last = heap.pop() as Timer;
    if (heap.length > 0) {
      heap[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < heap.length && less(heap[l], heap[m])) m = l;
        if (r < heap.length && less(heap[r], heap[m])) m = r;
        if (m === i) break;
        [heap[i], heap[m]] = [heap[m], heap[i]];
        i = m;
      }
    }
    return top;
  };
  const clock: VirtualClock = {
    now: () => now,
    setTimeout(fn, ms) {
      const t: Timer = { at: now + Math.max(0, ms), order: order++, fn, cancelled: false };
      push(t);
      return t;
    },
    clearTimeout(h) {
      if (h) (h as Timer).cancelled = true;
    },
    run(untilMs, stop) {
      let n = 0;
      while (!(stop && (n & 1023) === 0 && stop()) && clock.step(untilMs)) n++;
      return n;
    },
    step(untilMs) {
      while (heap.length > 0 && heap[0].at <= untilMs) {
        const t = pop();
        if (t.cancelled) continue;
        now = t.at;
        t.fn();
        return true;
      }
      return false;
    },
    pending: () => heap.length,
  };
  return clock;
}
