import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pickAffinity } from '../../src/routing/pickers/affinity.js';
import type { PickCandidate, PickInput } from '../../src/routing/pickers/pick-input.js';
import { loadCaps } from '../../src/routing/pickers/bounded-load.js';
import { rankByCost } from '../../src/routing/pickers/min-ttft.js';
import { rendezvousRank } from '../../src/routing/rendezvous.js';
import type { ReplicaView } from '../../src/routing/types.js';
import { fleet, prng, replica } from './helpers.js';

describe('picker: min estimated cost with random tie-break', () => {
  const table: [string, number[], number, number[]][] = [
    ['cheapest first, rest in cost order', [30, 10, 20], 0, [1, 2, 0]],
    ['a strictly cheaper one is never displaced by the tie rule', [10, 11.5, 12], 1, [0, 1, 2]],
  ];
  for (const [name, cost, tie, want] of table) {
    it(name, () => assert.deepEqual(rankByCost(cost, () => true, tie, prng(1)), want));
  }

  it('excludes what is not allowed', () => {
    assert.deepEqual(rankByCost([1, 2, 3], (i) => i !== 0, 0, prng(1)), [1, 2]);
  });

  it('ties (within tieMs) go to each tied replica about equally often', () => {
    const rand = prng(7);
    const counts = [0, 0, 0, 0];
    for (let i = 0; i < 3000; i++) counts[rankByCost([10, 10.5, 10.2, 50], () => true, 1, rand)[0]]++;
    assert.equal(counts[3], 0);
    for (const c of counts.slice(0, 3)) assert.ok(c > 850 && c < 1150, `${counts}`);
  });
});

describe('picker: bounded-load caps', () => {
  const table: [string, ReplicaView[], number, number, number, number[], number[]][] = [
    // 4 idle replicas: ⌈1.25 × 1/4⌉ = 1 each — the first request may go anywhere.
    ['idle', fleet(4), 1.25, 2, 0, [1, 1, 1, 1], [1, 1, 1, 1]],
    // 40 in flight over 4: ⌈1.25 × 41/4⌉ = 13; hard ⌈2 × 41/4⌉ = 21.
    ['loaded', fleet(4, { inflight: 10 }), 1.25, 2, 0, [13, 13, 13, 13], [21, 21, 21, 21]],
    ['hard cap floor', fleet(4, { inflight: 1 }), 1.25, 2, 8, [2, 2, 2, 2], [8, 8, 8, 8]],
    ['weighted', [replica('a', { weight: 3, inflight: 6 }), replica('b', { inflight: 1 })], 1.25, 2, 0, [8, 3], [12, 4]],
  ];
  for (const [name, rs, c, h, min, soft, hard] of table) {
    it(name, () => {
      const caps = loadCaps(rs, c, h, min);
      assert.deepEqual([caps.soft, caps.hard], [soft, hard]);
    });
  }
});

describe('picker: affinity decision', () => {
  const rs = fleet(4);
  const mk = (est: number[], bonus: number[] = [0, 0, 0, 0], matched: number[] = [0, 0, 0, 0]): PickCandidate[] =>
    rs.map((replica, i) => ({ replica, estimateMs: est[i], bonusMs: bonus[i], matched: matched[i] }));
  const base = (over: Partial<PickInput>): PickInput => ({
    candidates: mk([100, 100, 100, 100]),
    caps: { depth: [0, 0, 0, 0], soft: [5, 5, 5, 5], hard: [10, 10, 10, 10] },
    room: [true, true, true, true],
    home: -1, homeReason: 'pinned', pinLost: false, coolingDown: false,
    placementKey: 'session-1', tieMs: 1, random: prng(3), ...over,
  });
  const rv = (key: string, allowed: number[]) => rendezvousRank(key, allowed.map((i) => rs[i]))[0].name;

  const table: [string, Partial<PickInput>, string, string][] = [
    ['pinned stays when its estimate is not beaten', { home: 2, candidates: mk([300, 250, 180, 280], [0, 0, 100, 0]) }, 'r2', 'pinned'],
    ['the pin bonus is the hysteresis: 60 ms cheaper elsewhere is not enough', { home: 2, candidates: mk([340, 280, 340, 340], [0, 0, 100, 0]) }, 'r2', 'pinned'],
    ['spill when another replica is cheaper by more than the bonus', { home: 2, candidates: mk([900, 300, 900, 900], [0, 0, 100, 0]) }, 'r1', 'spill'],
    ['a cheaper replica over the soft cap is not a spill target', { home: 2, candidates: mk([900, 300, 900, 900], [0, 0, 100, 0]), caps: { depth: [0, 5, 0, 0], soft: [5, 5, 5, 5], hard: [10, 10, 10, 10] } }, 'r2', 'pinned'],
    ['cooling down: no cost spill', { home: 2, coolingDown: true, candidates: mk([900, 300, 900, 900], [0, 0, 100, 0]) }, 'r2', 'pinned'],
    ['over the hard cap: spill even while cooling down, to the cheapest with room', { home: 2, coolingDown: true, candidates: mk([500, 400, 100, 300]), caps: { depth: [0, 0, 10, 5], soft: [5, 5, 5, 5], hard: [10, 10, 10, 10] } }, 'r1', 'spill'],
    ['over the hard cap with no room under the soft cap: the cheapest under the hard cap', { home: 0, candidates: mk([100, 300, 200, 400]), caps: { depth: [10, 6, 9, 10], soft: [5, 5, 5, 5], hard: [10, 10, 10, 10] } }, 'r2', 'spill'],
    ['keyless prefix home stays', { home: 1, homeReason: 'prefix', candidates: mk([400, 200, 400, 400]) }, 'r1', 'prefix'],
    ['fresh placement: rendezvous order of the key', {}, rv('session-1', [0, 1, 2, 3]), 'placed'],
    ['fresh placement skips replicas at the soft cap', { caps: { depth: [5, 5, 0, 0], soft: [5, 5, 5, 5], hard: [10, 10, 10, 10] } }, rv('session-1', [2, 3]), 'placed'],
    ['fresh placement skips replicas past their share of recent traffic', { room: [false, true, false, true] }, rv('session-1', [1, 3]), 'placed'],
    ['no replica with traffic room: the in-flight bound alone decides', { room: [false, false, false, false] }, rv('session-1', [0, 1, 2, 3]), 'placed'],
    ['a spill goes to a replica with traffic room even if another is cheaper', { home: 2, candidates: mk([900, 300, 900, 500], [0, 0, 100, 0]), room: [true, false, true, true] }, 'r3', 'spill'],
    ['under KV pressure a spill skips a replica whose working set would no longer fit', { home: 2, candidates: mk([900, 300, 900, 500], [0, 0, 100, 0]), spillOk: (i) => i !== 1 }, 'r3', 'spill'],
    ['under KV pressure with no replica to take it, the session stays home', { home: 2, candidates: mk([900, 300, 900, 900], [0, 0, 100, 0]), spillOk: (i) => i === 2 }, 'r2', 'pinned'],
    ['pinned replica gone: failover', { pinLost: true }, rv('session-1', [0, 1, 2, 3]), 'failover'],
    ['no key at all: the cheapest', { placementKey: null, candidates: mk([300, 200, 100, 400]) }, 'r2', 'placed'],
  ];
  for (const [name, over, want, reason] of table) {
    it(name, () => {
      const got = pickAffinity(base(over));
      assert.equal(got.ranked[0].name, want);
      assert.equal(got.reason, reason);
      assert.equal(new Set(got.ranked.map((r) => r.name)).size, 4, 'every candidate ranked once, for failover');
    });
  }
});
