// The Redis activity channel (store/redis-activity.ts) in virtual time: each pod's store view
// announces its sessions' turns to every other pod as a gateway behind one redis-server would,
// a fresh placement after one pub/sub hop, every other turn in the next batch (flushMs). Without it
// the pods of a discrete-event run would share pins but not the fleet view placement reads.

import type { SessionStore, SessionTurn } from '../../../src/store/types.js';
import type { EngineClock } from '../../sim/engine.js';

export interface ActivityTiming {
  /** A published message reaching the other pods (Redis pub/sub on loopback: about a millisecond). */
  readonly hopMs: number;
  /** How often a pod sends its batched turns (the Redis store's default, 100 ms). */
  readonly flushMs: number;
}

export const ACTIVITY_TIMING: ActivityTiming = { hopMs: 1, flushMs: 100 };

/** One store view per pod over one shared store, their turns told to each other in virtual time. */
export function createActivityBus(shared: SessionStore, clock: EngineClock, timing: ActivityTiming = ACTIVITY_TIMING): (pod: number) => SessionStore {
  const listeners = new Map<number, (turn: SessionTurn) => void>();
  const deliver = (from: number, turns: readonly SessionTurn[]) => clock.setTimeout(() => {
    for (const [pod, listen] of listeners) if (pod !== from) for (const t of turns) listen(t);
  }, timing.hopMs);
  return (pod) => {
    let pending: SessionTurn[] = [];
    let flushing = false;
    const flush = () => {
      flushing = false;
      const batch = pending;
      pending = [];
      if (batch.length > 0) deliver(pod, batch);
    };
    return Object.assign(Object.create(shared) as SessionStore, {
      announce(turn: SessionTurn, now: boolean) {
        if (now) { deliver(pod, [turn]); return; }
        pending.push(turn);
        if (!flushing) { flushing = true; clock.setTimeout(flush, timing.flushMs); }
      },
      onTurn(listener: (turn: SessionTurn) => void) { listeners.set(pod, listener); },
    });
  };
}
