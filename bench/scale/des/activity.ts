// The Redis activity channel (store/redis-activity.ts) in virtual time: each pod's store view
// announces its sessions' turns to every other pod as a gateway behind one redis-server would,
// a fresh placement after one pub/sub hop, every other turn in the next batch (flushMs). Without it
// the pods of a discrete-event run would share pins but not the fleet view placement reads.

import { ACTIVITY_FLUSH_MS, addAdapterSent } from '../../../src/store/redis-activity.js';
import type { AdapterSent, PeerInflight, SessionStore, SessionTurn } from '../../../src/store/types.js';
import type { EngineClock } from '../../sim/engine.js';

export interface ActivityTiming {
  /** A published message reaching the other pods (Redis pub/sub on loopback: about a millisecond). */
  readonly hopMs: number;
  /** How often a pod sends its batched turns (the Redis store's default, 100 ms). */
  readonly flushMs: number;
}

export const ACTIVITY_TIMING: ActivityTiming = { hopMs: 1, flushMs: ACTIVITY_FLUSH_MS };

/** One store view per pod over one shared store, their turns told to each other in virtual time. */
export function createActivityBus(shared: SessionStore, clock: EngineClock, timing: ActivityTiming = ACTIVITY_TIMING): (pod: number) => SessionStore {
  const listeners = new Map<number, (turn: SessionTurn) => void>();
  const adapterListeners = new Map<number, (sent: AdapterSent) => void>();
  const inflightListeners = new Map<number, (peer: PeerInflight) => void>();
  const deliver = (from: number, turns: readonly SessionTurn[]) => clock.setTimeout(() => {
    for (const [pod, listen] of listeners) if (pod !== from) for (const t of turns) listen(t);
  }, timing.hopMs);
  const deliverAdapters = (from: number, sent: readonly AdapterSent[]) => clock.setTimeout(() => {
    for (const [pod, listen] of adapterListeners) if (pod !== from) for (const s of sent) listen(s);
  }, timing.hopMs);
  return (pod) => {
    let pending: SessionTurn[] = [];
    // Summed per replica and adapter until the batch goes, as the Redis store does.
    let pendingAdapters = new Map<string, AdapterSent>();
    let flushing = false;
    const flush = () => {
      flushing = false;
      const batch = pending;
      pending = [];
      if (batch.length > 0) deliver(pod, batch);
      const sent = [...pendingAdapters.values()];
      pendingAdapters = new Map();
      if (sent.length > 0) deliverAdapters(pod, sent);
    };
    const later = () => {
      if (!flushing) { flushing = true; clock.setTimeout(flush, timing.flushMs); }
    };
    return Object.assign(Object.create(shared) as SessionStore, {
      announce(turn: SessionTurn, now: boolean) {
        if (now) { deliver(pod, [turn]); return; }
        pending.push(turn);
        later();
      },
      onTurn(listener: (turn: SessionTurn) => void) { listeners.set(pod, listener); },
      announceAdapter(sent: AdapterSent, now: boolean) {
        addAdapterSent(pendingAdapters, sent, Number.POSITIVE_INFINITY);
        if (now) flush();
        else later();
      },
      onAdapterSent(listener: (sent: AdapterSent) => void) { adapterListeners.set(pod, listener); },
      // Sent at once, as the Redis store does (the caller paces it: fleet/peer-inflight.ts).
      announceInflight(counts: ReadonlyMap<string, number>) {
        const peer: PeerInflight = { instance: `pod-${pod}`, counts: new Map(counts) };
        clock.setTimeout(() => { for (const [p, listen] of inflightListeners) if (p !== pod) listen(peer); }, timing.hopMs);
      },
      onPeerInflight(listener: (peer: PeerInflight) => void) { inflightListeners.set(pod, listener); },
    });
  };
}
