import type { AdapterPlaceView, AdapterSlotBelief, AdapterSlotsView, LoraSlots, ReplicaView } from './types.js';

/**
 * What routing believes of each replica's LoRA slots between two scrapes: the adapters this gateway
 * sent there, when, and how much. vLLM runs at most max_loras distinct adapters in one batch; a
 * request for any other waits until one of them has nothing left running, however idle the replica
 * looks by queue length. The scrape (vllm:lora_requests_info) says what runs and waits at its
 * moment; what this gateway sent since is added to it.
 */
export interface AdapterRecency {
  /**
   * `count` requests for `adapter` were routed to `replica`, the last at `at` (this gateway's, or
   * another's heard through the shared store, possibly older than what is counted already).
   */
  touch(replica: string, adapter: string, at: number, count?: number): void;
  /** The adapters last sent to `replica` after `since` (wall ms). */
  sentAfter(replica: string, since: number): readonly string[];
  /** When `adapter` was last sent to `replica` (wall ms), null when it is not remembered. */
  lastSent(replica: string, adapter: string): number | null;
  /**
   * The requests for `adapter` routed to any replica lately (decayed with the traffic half-life),
   * and those of every adapter: its share of the fleet's adapter traffic.
   */
  demand(adapter: string, now: number): { readonly mine: number; readonly all: number };
  /** The adapter requests routed to `replica` lately, decayed as demand() is. */
  routed(replica: string, now: number): number;
  /** The replica left or lost its state: nothing is believed of it. */
  forget(replica: string): void;
}

interface Sent {
  at: number;
  /** Requests routed, decayed to `at`. */
  count: number;
}

/**
 * `keepMs`: the longest window anything asks about; older entries are dropped as the replica is
 * touched. `halfLifeMs`: how fast the request counts decay (routing.options.trafficHalfLifeMs, the
 * replicas' own recent-traffic load), so that an adapter's share is in the units the load bound uses.
 */
export function createAdapterRecency(keepMs: () => number, halfLifeMs: () => number): AdapterRecency {
  const byReplica = new Map<string, Map<string, Sent>>();
  // Fleet-wide, per adapter and in all: the same counts summed over replicas as they are touched.
  const byAdapter = new Map<string, Sent>();
  let total: Sent = { at: 0, count: 0 };
  let pruneAt = 32;
  const decayed = (s: Sent | undefined, now: number) => (s === undefined ? 0 : s.count * 2 ** (-Math.max(0, now - s.at) / Math.max(1, halfLifeMs())));
  // Counts heard late (another gateway's batch) are decayed to the entry's time, not the other way.
  const add = (s: Sent | undefined, at: number, n: number): Sent => (s !== undefined && at < s.at
    ? { at: s.at, count: s.count + n * 2 ** (-(s.at - at) / Math.max(1, halfLifeMs())) }
    : { at, count: decayed(s, at) + n });
  return {
    touch(replica, adapter, at, count = 1) {
      let m = byReplica.get(replica);
      if (m === undefined) byReplica.set(replica, (m = new Map()));
      m.set(adapter, add(m.get(adapter), at, count));
      byAdapter.set(adapter, add(byAdapter.get(adapter), at, count));
      total = add(total, at, count);
      // Bounded by the adapters the replicas serve; names unloaded long ago go here.
      const keep = keepMs();
      for (const [a, x] of m) if (at - x.at > keep) m.delete(a);
      if (byAdapter.size > pruneAt) {
        for (const [a, x] of byAdapter) if (at - x.at > keep) byAdapter.delete(a);
        pruneAt = 2 * Math.max(16, byAdapter.size);
      }
    },
    sentAfter(replica, since) {
      const m = byReplica.get(replica);
      if (m === undefined) return [];
      const out: string[] = [];
      for (const [a, x] of m) if (x.at > since) out.push(a);
      return out;
    },
    lastSent: (replica, adapter) => byReplica.get(replica)?.get(adapter)?.at ?? null,
    routed(replica, now) {
      let n = 0;
      for (const x of byReplica.get(replica)?.values() ?? []) n += decayed(x, now);
      return n;
    },
    demand: (adapter, now) => ({ mine: decayed(byAdapter.get(adapter), now), all: decayed(total, now) }),
    forget: (replica) => void byReplica.delete(replica),
  };
}

/** A request for `adapter` stuck behind full slots right now, by the replica's last scrape. */
function stuck(s: LoraSlots, adapter: string): boolean {
  return s.waiting.has(adapter) && !s.running.has(adapter) && s.running.size >= s.maxLoras;
}

/**
 * `loadedIsHome`: for an adapter the gateway loads on demand, a replica that has it loaded is one of
 * its homes even while idle there, so that its new sessions go where no load is needed. (Adapters
 * the replicas load themselves are listed everywhere they may run: there a listing says nothing.)
 */
export function adapterSlotsView(adapter: string, recency: AdapterRecency, now: number, busyMs: number, homeMs: number, loadedIsHome = false): AdapterSlotsView {
  const slotsOf = (r: ReplicaView): LoraSlots | null => (r.lora != null && r.lora.maxLoras > 0 ? r.lora : null);
  const homedOn = (r: ReplicaView, s: LoraSlots): Set<string> => {
    const homed = new Set([...s.running, ...s.waiting]);
    for (const a of recency.sentAfter(r.name, now - homeMs)) homed.add(a);
    return homed;
  };
  function slot(r: ReplicaView): AdapterSlotBelief | null {
    const s = slotsOf(r);
    if (s === null) return null;
    if (s.running.has(adapter)) return 'running';
    if (stuck(s, adapter)) return 'wait';
    // What was sent too late for the last scrape to have seen it runs there now, as far as anyone knows.
    const busy = new Set(s.running);
    for (const a of recency.sentAfter(r.name, (r.lastScrapeAt ?? -Infinity) - busyMs)) busy.add(a);
    if (busy.has(adapter)) return 'running';
    if (busy.size >= s.maxLoras) return 'wait';
    // Slots idle at the last scrape are no free slot for an adapter new there when each is another
    // adapter's home: its sessions would contend with theirs turn after turn.
    const homed = homedOn(r, s);
    return !homed.has(adapter) && homed.size >= s.maxLoras ? 'wait' : 'free';
  }
  const wait = (r: ReplicaView) => (slot(r) === 'wait' ? 1 : 0);
  return {
    adapter,
    wait,
    slot,
    place(r) {
      const s = slotsOf(r);
      const load = recency.routed(r.name, now);
      if (s === null) return { tier: 1, slots: 0, load };
      const homed = homedOn(r, s);
      if (homed.has(adapter) || (loadedIsHome && r.adapters?.has(adapter))) return { tier: wait(r) > 0 ? 2 : 0, slots: s.maxLoras, load };
      return { tier: homed.size < s.maxLoras ? 1 : 2, slots: s.maxLoras, load };
    },
    demand: () => recency.demand(adapter, now),
  };
}

/** Whether `model` is an adapter one of the replicas serves (the check is cheap where none serves any). */
export function isAdapter(model: string | null, replicas: readonly ReplicaView[]): model is string {
  if (model === null) return false;
  for (const r of replicas) if (r.adapters !== undefined && r.adapters.size > 0 && r.adapters.has(model)) return true;
  return false;
}
