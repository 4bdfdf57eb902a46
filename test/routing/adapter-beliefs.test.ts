import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { adapterSlotsView, createAdapterRecency } from '../../src/routing/adapter-slots.js';
import { createRouter } from '../../src/routing/router.js';
import type { LoraSlots } from '../../src/routing/types.js';
import { keyIdentity, replica, store } from './helpers.js';

const slots = (maxLoras: number, running: string[], waiting: string[] = []): LoraSlots => ({ maxLoras, running: new Set(running), waiting: new Set(waiting) });
const adapters = new Map([['a', 'base'], ['b', 'base'], ['c', 'base']]);
const T = 1_000_000;

describe('what routing believes of a replica’s LoRA slots', () => {
  it('no wait where the adapter runs or a slot is free; a wait where every slot holds others, or where it is stuck', () => {
    const recency = createAdapterRecency(() => 60_000, () => 30_000);
    const v = adapterSlotsView('a', recency, T, 500, 60_000);
    assert.equal(v.wait(replica('x', { adapters, lora: slots(1, ['a']), lastScrapeAt: T })), 0);
    assert.equal(v.wait(replica('x', { adapters, lora: slots(2, ['b']), lastScrapeAt: T })), 0);
    assert.equal(v.wait(replica('x', { adapters, lora: slots(1, ['b']), lastScrapeAt: T })), 1);
    assert.equal(v.wait(replica('x', { adapters, lora: slots(2, ['b', 'c'], ['a']), lastScrapeAt: T })), 1);
    // A replica that reports no slots: nothing known, no wait.
    assert.equal(v.wait(replica('x', { adapters, lora: null })), 0);
  });

  it('counts heard late from another gateway add as if touched at their own time, whatever arrived before them', () => {
    const half = 30_000;
    const inOrder = createAdapterRecency(() => 600_000, () => half);
    inOrder.touch('x', 'a', T - half, 4);
    inOrder.touch('x', 'a', T, 1);
    const late = createAdapterRecency(() => 600_000, () => half);
    late.touch('x', 'a', T, 1);
    late.touch('x', 'a', T - half, 4);
    for (const r of [inOrder, late]) {
      assert.ok(Math.abs(r.routed('x', T) - 3) < 1e-9, `${r.routed('x', T)}: 1 now and 4 a half-life ago`);
      assert.ok(Math.abs(r.demand('a', T).mine - 3) < 1e-9 && Math.abs(r.demand('a', T).all - 3) < 1e-9);
      // A late count does not make the adapter look sent later than it was.
      assert.deepEqual(r.sentAfter('x', T - 1), ['a']);
    }
  });

  it('an adapter sent since the last scrape (less its lag) holds a slot until a later scrape', () => {
    const recency = createAdapterRecency(() => 60_000, () => 30_000);
    recency.touch('x', 'b', T - 100);
    // A home window shorter than b's age: only its being in flight is asked about.
    const v = adapterSlotsView('a', recency, T, 500, 50);
    assert.equal(v.wait(replica('x', { adapters, lora: slots(1, []), lastScrapeAt: T - 200 })), 1, 'sent after the scrape');
    assert.equal(v.wait(replica('x', { adapters, lora: slots(1, []), lastScrapeAt: T + 1000 })), 0, 'a scrape long after saw it gone');
  });

  it('slots idle at the scrape are no free slot for an adapter new there when each is another adapter’s home', () => {
    const recency = createAdapterRecency(() => 60_000, () => 30_000);
    recency.touch('x', 'b', T - 30_000);
    const v = adapterSlotsView('a', recency, T, 500, 60_000);
    const x = replica('x', { adapters, lora: slots(1, []), lastScrapeAt: T });
    assert.equal(v.slot(x), 'wait', 'b has sessions there within the working-set window');
    assert.equal(v.slot(replica('x', { adapters, lora: slots(2, []), lastScrapeAt: T })), 'free', 'a second slot');
    // b itself is at home there: no wait for it.
    assert.equal(adapterSlotsView('b', recency, T, 500, 60_000).slot(x), 'free');
  });

  it('a new session’s tier: its adapter at home, else a free slot, else every slot homed by others', () => {
    const recency = createAdapterRecency(() => 60_000, () => 30_000);
    recency.touch('x', 'b', T - 30_000);
    const v = adapterSlotsView('a', recency, T, 500, 60_000);
    assert.equal(v.place(replica('x', { adapters, lora: slots(1, ['a']), lastScrapeAt: T })).tier, 0);
    assert.equal(v.place(replica('x', { adapters, lora: slots(1, []), lastScrapeAt: T })).tier, 2, 'b was sent there within the window');
    assert.equal(v.place(replica('y', { adapters, lora: slots(1, []), lastScrapeAt: T })).tier, 1);
    assert.equal(v.place(replica('y', { adapters, lora: null })).tier, 1);
  });

  it('a request sent where it will wait, for want of a better replica, says so in its decision; a non-adapter request never does', () => {
    const router = createRouter('affinity', { store: store(), now: () => T });
    const full = [replica('x', { adapters, lora: slots(1, ['b']), lastScrapeAt: T }), replica('y', { adapters, lora: slots(1, ['c']), lastScrapeAt: T })];
    const d = router.route({ identity: { ...keyIdentity('s'), model: 'a' }, replicas: full });
    assert.equal(d.slotWait, true);
    const free = [replica('x', { adapters, lora: slots(1, ['b']), lastScrapeAt: T }), replica('y', { adapters, lora: slots(1, []), lastScrapeAt: T })];
    const d2 = router.route({ identity: { ...keyIdentity('s2'), model: 'a' }, replicas: free });
    assert.equal(d2.ranked[0].name, 'y');
    assert.equal(d2.reason, 'adapter');
    assert.ok(!d2.slotWait);
    assert.ok(!router.route({ identity: keyIdentity('s3'), replicas: full }).slotWait);
  });
});
