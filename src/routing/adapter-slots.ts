import type { LoraSlots, ReplicaView } from './types.js';

/**
 * What routing believes of each replica's LoRA slots between two scrapes: the adapters this gateway
 * sent there, and when. vLLM runs at most max_loras distinct adapters in one batch; a request for
 * any other waits until one of them has nothing left running, however idle the replica looks by
 * queue length. The scrape (vllm:lora_requests_info) says what runs and waits at its moment; what
 * this gateway sent since is added to it.
 */
export interface AdapterRecency {
  /** A request for `adapter` was routed to `replica` at `now`. */
  touch(replica: string, adapter: string, now: number): void;
  /** The adapters last sent to `replica` after `since` (wall ms). */
  sentAfter(replica: string, since: number): readonly string[];
  /** The replica left or lost its state: nothing is believed of it. */
  forget(replica: string): void;
}

/** `keepMs`: the longest window anything asks about; older entries are dropped as the replica is touched. */
export function createAdapterRecency(keepMs: () => number): AdapterRecency {
  const byReplica = new Map<string, Map<string, number>>();
  return {
    touch(replica, adapter, now) {
      let m = byReplica.get(replica);
      if (m === undefined) byReplica.set(replica, (m = new Map()));
      m.set(adapter, now);
      // Bounded by the adapters the replica serves; names unloaded long ago go here.
      const keep = keepMs();
      for (const [a, at] of m) if (now - at > keep) m.delete(a);
    },
    sentAfter(replica, since) {
      const m = byReplica.get(replica);
      if (m === undefined) return [];
      const out: string[] = [];
      for (const [a, at] of m) if (at > since) out.push(a);
      return out;
    },
    forget: (replica) => void byReplica.delete(replica),
  };
}

/**
 * A request's view of the candidates' LoRA slots, built once per decision for a request that names
 * an adapter (absent otherwise).
 */
export interface AdapterSlotsView {
  readonly adapter: string;
  /** 1 where the request would wait for a slot (every slot held by other adapters with work in flight), else 0. */
  wait(r: ReplicaView): number;
  /**
   * What the request is believed to meet on `r`: its adapter `running` there (by the scrape, or
   * sent since), a `free` slot, or a `wait`; null where the replica reports no slots.
   */
  slot(r: ReplicaView): AdapterSlotBelief | null;
  /**
   * For a new session: 0 where its adapter is at home (running, waiting, or sent within the
   * working-set window) and not stuck waiting, 1 where a slot is free for it, 2 where every slot
   * is homed by other adapters. A replica that reports no slots is 1: nothing known either way.
   */
  tier(r: ReplicaView): number;
}

export type AdapterSlotBelief = 'running' | 'free' | 'wait';

/** A request for `adapter` stuck behind full slots right now, by the replica's last scrape. */
function stuck(s: LoraSlots, adapter: string): boolean {
  return s.waiting.has(adapter) && !s.running.has(adapter) && s.running.size >= s.maxLoras;
}

export function adapterSlotsView(adapter: string, recency: AdapterRecency, now: number, busyMs: number, homeMs: number): AdapterSlotsView {
  const slotsOf = (r: ReplicaView): LoraSlots | null => (r.lora != null && r.lora.maxLoras > 0 ? r.lora : null);
  function slot(r: ReplicaView): AdapterSlotBelief | null {
    const s = slotsOf(r);
    if (s === null) return null;
    if (s.running.has(adapter)) return 'running';
    if (stuck(s, adapter)) return 'wait';
    // What was sent too late for the last scrape to have seen it runs there now, as far as anyone knows.
    const busy = new Set(s.running);
    for (const a of recency.sentAfter(r.name, (r.lastScrapeAt ?? -Infinity) - busyMs)) busy.add(a);
    if (busy.has(adapter)) return 'running';
    return busy.size >= s.maxLoras ? 'wait' : 'free';
  }
  const wait = (r: ReplicaView) => (slot(r) === 'wait' ? 1 : 0);
  return {
    adapter,
    wait,
    slot,
    tier(r) {
      const s = slotsOf(r);
      if (s === null) return 1;
      const homed = new Set([...s.running, ...s.waiting]);
      for (const a of recency.sentAfter(r.name, now - homeMs)) homed.add(a);
      if (homed.has(adapter)) return wait(r) > 0 ? 2 : 0;
      return homed.size < s.maxLoras ? 1 : 2;
    },
  };
}

/** Whether `model` is an adapter one of the replicas serves (the check is cheap where none serves any). */
export function isAdapter(model: string | null, replicas: readonly ReplicaView[]): model is string {
  if (model === null) return false;
  for (const r of replicas) if (r.adapters !== undefined && r.adapters.size > 0 && r.adapters.has(model)) return true;
  return false;
}
