import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createRouter } from '../../src/routing/router.js';
import type { LoraSlots, ReplicaView } from '../../src/routing/types.js';
import { keyIdentity, replica, store } from './helpers.js';

const T = 1_000_000;
const served = new Map(['a', 'b', 'c', 'd', 'e'].map((x) => [x, 'base']));
const slots = (maxLoras: number, running: string[] = []): LoraSlots => ({ maxLoras, running: new Set(running), waiting: new Set() });
const fleetOf = (n: number, maxLoras: number, running: string[][] = []) =>
  Array.from({ length: n }, (_, i) => replica(`r${i}`, { adapters: served, lora: slots(maxLoras, running[i] ?? []), lastScrapeAt: T }));

/** A new keyed session of `adapter`: where it went and why. */
function place(router: ReturnType<typeof createRouter>, replicas: readonly ReplicaView[], session: string, adapter: string) {
  const d = router.route({ identity: { ...keyIdentity(session), model: adapter }, replicas });
  return { replica: d.ranked[0].name, reason: d.reason };
}

describe('new sessions of LoRA adapters packed into the fewest slots', () => {
  it('a rare adapter stays on its replica past the soft load bound rather than take another replica’s slot', () => {
    const router = createRouter('affinity', { store: store(), now: () => T });
    const rs = fleetOf(4, 2);
    const first = place(router, rs, 's1', 'a');
    // Its replica is past the soft bound (c × the mean in flight) but under the hard cap.
    const home = rs.find((r) => r.name === first.replica)!;
    home.inflight = 8;
    for (const r of rs) if (r !== home) r.inflight = 2;
    const next = place(router, rs, 's2', 'a');
    assert.deepEqual(next, { replica: first.replica, reason: 'adapter' });
  });

  it('an adapter busier than its replicas carry gets a new one, with a free slot and the least adapter traffic', () => {
    const router = createRouter('affinity', { store: store(), now: () => T });
    // r1's one free slot is behind an adapter with traffic; r2's behind one without.
    const rs = fleetOf(3, 2, [[], ['d'], ['e']]);
    for (let i = 0; i < 3; i++) assert.equal(place(router, rs, `d${i}`, 'd').replica, 'r1');
    const placed = Array.from({ length: 8 }, (_, i) => place(router, rs, `a${i}`, 'a'));
    assert.ok(placed.every((p) => p.reason === 'adapter'), JSON.stringify(placed));
    // Most of the fleet's traffic is a's: more than one replica's share at the load bound. Its
    // second replica is the free slot with the least adapter traffic: r2 (e, idle), not r1 (d).
    assert.deepEqual([...new Set(placed.map((p) => p.replica))].sort(), ['r0', 'r2']);
  });

  it('on two replicas, the one adapter with all the traffic gets the second replica once its first is past the soft bound', () => {
    const router = createRouter('affinity', { store: store(), now: () => T });
    const rs = fleetOf(2, 2);
    const first = place(router, rs, 'o0', 'a').replica;
    for (let i = 1; i < 3; i++) assert.equal(place(router, rs, `o${i}`, 'a').replica, first);
    // Its replica past the soft bound, the other idle with free slots: the only replica the bound
    // leaves is the one a busy adapter spreads to, so the usual placement takes it.
    rs.find((r) => r.name === first)!.inflight = 4;
    assert.notEqual(place(router, rs, 'o3', 'a').replica, first);
  });

  it('a new adapter takes a free slot, never a replica whose every slot is another adapter’s home however idle it is', () => {
    const router = createRouter('affinity', { store: store(), now: () => T });
    const rs = fleetOf(2, 1, [['b'], []]);
    rs[0].inflight = 0;
    rs[1].inflight = 6;
    const d = router.route({ identity: { ...keyIdentity('n'), model: 'a' }, replicas: rs });
    assert.equal(d.ranked[0].name, 'r1');
    assert.equal(d.reason, 'adapter');
    assert.ok(!d.slotWait);
  });
});
