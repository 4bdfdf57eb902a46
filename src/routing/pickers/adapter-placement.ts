import { rendezvousRank } from '../rendezvous.js';
import type { AdapterPlaceView, ReplicaView } from '../types.js';
import type { AdapterPlacementInput, PickInput } from './pick-input.js';
import { cheapestByCost } from './min-ttft.js';

/**
 * How far past the mean of the adapter requests routed lately a busy adapter's home may be before
 * its new sessions go to a new home: between the soft bound (loadFactor, 1.25) that in-flight
 * swings trip now and then, and the hard cap (2×). Measured on `npm run bench:adapters`: at 1.25
 * busy adapters spread on every swing and use up the slots the rare ones need (p90 up to 1.9× the
 * oracle's); at 1.625 the busiest replica reaches 1.45× the mean. At 1.4 no replica passes 1.3× the
 * mean on seeds 1–12, but homes opened on early, noisy shares take the slots later adapters need:
 * p90 1.21–1.63× the oracle's on seeds 2, 4 and 5 (design notes: the variants measured).
 */
export const ADAPTER_HOME_LOAD = 1.5;

/** The candidates with LoRA slots, and their slots in all. */
function slotTotals(at: readonly AdapterPlaceView[]): { replicas: number; slots: number } {
  let replicas = 0;
  let slots = 0;
  for (const v of at) {
    if (v.slots <= 0) continue;
    replicas++;
    slots += v.slots;
  }
  return { replicas, slots };
}

/**
 * An adapter's share of the fleet's recent adapter requests. Until the fleet has seen as many as
 * it has slots, the share is taken over that many: the first requests of a burst would make any
 * adapter look like the whole fleet's traffic, and a replica given to it then is a slot that the
 * adapters still to come do not have.
 */
function shareOf(input: AdapterPlacementInput, slots: number): number {
  return input.demand.mine / Math.max(input.demand.all, slots, 1);
}

/**
 * How many replicas an adapter's traffic needs: each of its homes carries at most loadFactor × a
 * replica's fair share of it (the adapter-grouping oracle's split, at the load bound).
 */
export function homesNeeded(input: AdapterPlacementInput): number {
  const { replicas, slots } = slotTotals(input.at);
  if (replicas === 0) return 1;
  return Math.max(1, Math.ceil((shareOf(input, slots) * replicas) / input.loadFactor));
}

/**
 * A new session of a LoRA adapter, packed into the fewest slots its traffic needs (vLLM runs at
 * most max_loras adapters in one batch; one adapter more on a replica waits for a slot, seconds
 * at a time). In order:
 * 1. an adapter with fewer homes than its traffic needs (homesNeeded) gets a new one: a replica
 *    with a slot free for it, under the load bounds, the least adapter traffic first;
 * 2. where its adapter is at home, under the soft load bound, the least adapter traffic first;
 * 3. still at home, up to the hard cap, when the adapter is rare (less than one slot's share of
 *    the fleet's adapter traffic: it adds little load, and a second replica for it would take a
 *    slot another adapter then lacks), or its home has carried under ADAPTER_HOME_LOAD × the mean
 *    of the adapter requests routed lately;
 * 4. a new home, as in 1 (a busy adapter whose homes are full);
 * 5. at home up to the hard cap (no replica has a free slot under the bounds);
 * 6. a new adapter: a free slot under the soft bound, else the hard cap, the least adapter
 *    traffic first (not the fewest queued requests alone: the slots run out before the queues do).
 * Among the replicas a step allows: the capacity placement's choice if it is one, else the
 * rendezvous of its key (the cheapest without a key). −1 when no step applies, or when the step
 * leaves out none of the replicas under the soft bound: the usual placement decides, with its
 * own reason.
 */
export function adapterPlaced(p: PickInput, soft: (i: number) => boolean, hard: (i: number) => boolean): number {
  const input = p.adapter?.place;
  if (!input) return -1;
  const at = input.at;
  const c = p.candidates;
  const home = (i: number) => at[i].tier === 0;
  const free = (i: number) => at[i].tier === 1 && at[i].slots > 0;

  /**
   * One step: undefined when it allows no replica (the next step is asked); −1 when it allows
   * exactly the replicas under the soft bound (the usual placement chooses among the same, with
   * its own reason); else its choice.
   */
  function step(allowed: (i: number) => boolean): number | undefined {
    let any = false;
    let same = true;
    for (let i = 0; i < c.length; i++) {
      const ok = allowed(i);
      any ||= ok;
      if (ok !== soft(i)) same = false;
    }
    if (!any) return undefined;
    if (same) return -1;
    if (p.byCapacity && p.byCapacity.index >= 0 && allowed(p.byCapacity.index)) return p.byCapacity.index;
    if (p.placementKey !== null) {
      const open: ReplicaView[] = [];
      for (let i = 0; i < c.length; i++) if (allowed(i)) open.push(c[i].replica);
      const first = rendezvousRank(p.placementKey, open)[0];
      return c.findIndex((x) => x.replica === first);
    }
    return cheapestByCost(c.map((x) => x.estimateMs - x.bonusMs), allowed, p.tieMs, p.random);
  }
  /** A step among the replicas `ok` allows with the least adapter traffic. */
  function leastLoaded(ok: (i: number) => boolean): number | undefined {
    let least = Infinity;
    for (let i = 0; i < c.length; i++) if (ok(i) && at[i].load < least) least = at[i].load;
    return least === Infinity ? undefined : step((i) => ok(i) && at[i].load === least);
  }

  const { replicas, slots } = slotTotals(at);
  let total = 0;
  for (const v of at) if (v.slots > 0) total += v.load;
  // Bounded load on the adapter requests routed lately (traffic.ts's bound, over adapter requests):
  // in-flight counts swing with every reply, these follow the sessions.
  const under = (f: number) => (i: number) => at[i].slots <= 0 || at[i].load + 1 <= (f * (total + 1)) / Math.max(1, replicas);
  const room = under(input.loadFactor);
  const homeRoom = under(ADAPTER_HOME_LOAD);
  const rare = shareOf(input, slots) * Math.max(1, slots) <= 1;
  let homes = 0;
  for (let i = 0; i < c.length; i++) if (home(i)) homes++;
  /** A slot free for the adapter under `cap`, the least adapter traffic first. */
  const freeSlot = (cap: (i: number) => boolean) => leastLoaded((i) => free(i) && cap(i));
  const spread = () => freeSlot((i) => soft(i) && room(i));

  const steps: (() => number | undefined)[] = homes === 0
    ? [() => freeSlot(soft), () => freeSlot(hard)]
    : [
      () => (homes < homesNeeded(input) ? spread() : undefined),
      // Its sessions spread over its homes by load: the one with the least adapter traffic.
      () => leastLoaded((j) => home(j) && soft(j)),
      () => step((j) => home(j) && hard(j) && (rare || homeRoom(j))),
      spread,
      () => step((j) => home(j) && hard(j)),
    ];
  for (const s of steps) {
    const i = s();
    if (i !== undefined) return i;
  }
  return -1;
}
