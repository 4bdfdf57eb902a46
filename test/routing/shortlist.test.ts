import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { capacityReading, buildContext, CAPACITY_REREAD_MS, type ContextDeps } from '../../src/routing/context.js';
import { createAdapterRecency } from '../../src/routing/adapter-slots.js';
import { depthOf } from '../../src/routing/load.js';
import { cheapestByCost, rankByCost, rankCheapest } from '../../src/routing/pickers/min-ttft.js';
import type { PrefixIndex } from '../../src/routing/prefix-index.js';
import { createRouter } from '../../src/routing/router.js';
import { createShortlist, RANKED_MAX, SHORTLIST_LEAST_LOADED, SHORTLIST_MIN_FLEET } from '../../src/routing/shortlist.js';
import type { Traffic } from '../../src/routing/traffic.js';

const shortlist = (ctx: RouteContext, all: readonly MutableReplica[], traffic: Traffic, ttl: number) => createShortlist(traffic, () => ttl)(ctx, all);
import { createTraffic } from '../../src/routing/traffic.js';
import type { RouteContext } from '../../src/routing/types.js';
import { createWorkingSet } from '../../src/routing/working-set.js';
import { fleet, keyIdentity, prng, store, type MutableReplica } from './helpers.js';

const T = 1_000_000;
const pinOf = (replica: string) => ({ key: 's1', replica, warmTokens: 0, lastSeen: T, since: T - 60_000 });

function ctxOf(over: Partial<RouteContext>, replicas: readonly MutableReplica[]): RouteContext {
  return { identity: keyIdentity('s1'), replicas, now: T, pin: null, warm: new Map(), avoid: null, ...over };
}

/** A fleet with a spread of loads: replica i has (i × 7) mod 11 requests in flight. */
function loaded(n: number): MutableReplica[] {
  const rs = fleet(n);
  rs.forEach((r, i) => { r.inflight = (i * 7) % 11; });
  return rs;
}

describe('shortlist: what a decision scores in a large fleet', () => {
  it('a pinned session is decided among its replica and the least loaded, against the whole fleet\'s sums', () => {
    const rs = loaded(64);
    const traffic = createTraffic(30_000);
    for (let i = 0; i < 64; i++) for (let k = 0; k < i % 5; k++) traffic.served(rs[i].name, T - 1000);
    const s = shortlist(ctxOf({ pin: pinOf('r40') }, rs), rs, traffic, 600_000);
    assert.ok(s.candidates.length <= 1 + SHORTLIST_LEAST_LOADED, `${s.candidates.length}`);
    const names = s.candidates.map((r) => r.name);
    assert.ok(names.includes('r40'), 'the pin is among them');
    // Every replica left out is at least as loaded as every least-loaded one kept.
    const kept = s.candidates.filter((r) => r.name !== 'r40');
    const worstKept = Math.max(...kept.map(depthOf));
    for (const r of rs) if (!names.includes(r.name)) assert.ok(depthOf(r) >= worstKept, `${r.name} left out at depth ${depthOf(r)}`);
    // In the fleet's order, as a full scoring sees them.
    assert.deepEqual(names, rs.map((r) => r.name).filter((n) => names.includes(n)));
    // The sums are the whole fleet's, not the shortlist's.
    assert.equal(s.fleet.depth, rs.reduce((n, r) => n + depthOf(r), 0));
    assert.equal(s.fleet.weight, 64);
    assert.equal(s.fleet.deepest, 10);
    const traffics = rs.reduce((n, r) => n + traffic.of(r.name, T), 0);
    assert.ok(Math.abs(s.fleet.traffic - traffics) < 1e-9 * traffics, `${s.fleet.traffic} vs ${traffics}`);
    assert.equal(s.fleet.all, rs);
  });

  it('among equally loaded replicas, each decision starts where the last one\'s window ended: idle replicas take turns', () => {
    const rs = fleet(64);
    const pick = createShortlist(createTraffic(30_000), () => 600_000);
    const seen = new Set<string>();
    for (let k = 0; k < 64 / SHORTLIST_LEAST_LOADED + 1; k++) {
      const s = pick(ctxOf({ pin: pinOf('r0') }, rs), rs);
      assert.ok(s.candidates.length <= 1 + SHORTLIST_LEAST_LOADED);
      for (const r of s.candidates) seen.add(r.name);
    }
    assert.equal(seen.size, 64, 'every idle replica was among the spill targets in turn');
    // A replica with less in flight than the rest is always kept.
    rs.forEach((r) => { r.inflight = 3; });
    rs[37].inflight = 0;
    for (let k = 0; k < 8; k++) assert.ok(pick(ctxOf({ pin: pinOf('r0') }, rs), rs).candidates.includes(rs[37]));
  });

  it('with a replica filtered out, the sums and the warm replicas are read the long way, and agree', () => {
    const rs = loaded(64);
    const traffic = createTraffic(30_000);
    for (let i = 0; i < 64; i++) traffic.served(rs[i].name, T - 1000);
    const some = rs.filter((r) => r.name !== 'r5');
    const s = createShortlist(traffic, () => 600_000)(ctxOf({ pin: pinOf('r1'), warm: new Map([['r9', 10], ['r5', 10]]) }, rs), some);
    assert.ok(Math.abs(s.fleet.traffic - some.reduce((n, r) => n + traffic.of(r.name, T), 0)) < 1e-9 * s.fleet.traffic);
    const names = s.candidates.map((r) => r.name);
    assert.ok(names.includes('r1') && names.includes('r9') && !names.includes('r5'));
  });

  it('the warm replicas are found again when the list changes in place', () => {
    const rs = loaded(64);
    const pick = createShortlist(createTraffic(30_000), () => 600_000);
    const warm = new Map([['r50', 10]]);
    assert.ok(pick(ctxOf({ pin: pinOf('r1'), warm }, rs), rs).candidates.some((r) => r.name === 'r50'));
    // Same length, another order: r50 is elsewhere now.
    rs.reverse();
    assert.ok(pick(ctxOf({ pin: pinOf('r1'), warm }, rs), rs).candidates.some((r) => r.name === 'r50'));
    rs.splice(rs.findIndex((r) => r.name === 'r50'), 1);
    assert.ok(!pick(ctxOf({ pin: pinOf('r1'), warm }, rs), rs).candidates.some((r) => r.name === 'r50'));
  });

  it('a replica new in a list changed in place is found within a second, without a rebuild per decision', () => {
    const rs = loaded(64);
    const pick = createShortlist(createTraffic(30_000), () => 600_000);
    const warm = new Map([['fresh', 10]]);
    const at = (t: number) => pick({ ...ctxOf({ pin: pinOf('r1'), warm }, rs), now: t }, rs).candidates.some((r) => r.name === 'fresh');
    assert.equal(at(T), false);
    rs[20] = { ...rs[20], name: 'fresh', inflight: 10 };
    assert.equal(at(T + 500), false, 'the index is rebuilt for an unknown name at most once a second');
    assert.equal(at(T + 1000), true);
  });

  it('a keyless conversation keeps every replica believed warm, and counts as homed past its shared prompt', () => {
    const rs = loaded(64);
    const id = { ...keyIdentity(null), sharedTokens: 100, promptTokens: 400 };
    const warm = new Map([['r3', 100], ['r9', 300]]);
    const s = shortlist(ctxOf({ identity: id, warm }, rs), rs, createTraffic(30_000), 600_000);
    const names = s.candidates.map((r) => r.name);
    assert.ok(names.includes('r3') && names.includes('r9'));
    assert.ok(s.candidates.length <= 2 + SHORTLIST_LEAST_LOADED);
  });

  it('a fresh placement ranks every candidate: no pin, a pin whose replica is gone, a stale conversation record, or only the shared prompt warm', () => {
    const rs = loaded(64);
    const tr = createTraffic(30_000);
    const keyless = { ...keyIdentity(null), sharedTokens: 100, promptTokens: 400 };
    const stale = { key: 'c1', replica: 'r5', warmTokens: 0, lastSeen: T - 700_000, since: T - 700_000 };
    for (const ctx of [
      ctxOf({}, rs),
      ctxOf({ pin: pinOf('gone') }, rs),
      ctxOf({ identity: keyless, conversation: stale }, rs),
      ctxOf({ identity: keyless, warm: new Map([['r3', 100]]) }, rs),
    ]) assert.equal(shortlist(ctx, rs, tr, 600_000).candidates, rs);
    // A fresh conversation record is a home.
    const fresh = { ...stale, lastSeen: T - 1000 };
    assert.notEqual(shortlist(ctxOf({ identity: keyless, conversation: fresh }, rs), rs, tr, 600_000).candidates, rs);
  });

  it('a fleet too small to gain from it is scored whole', () => {
    const rs = loaded(SHORTLIST_MIN_FLEET - 1);
    assert.equal(shortlist(ctxOf({ pin: pinOf('r1') }, rs), rs, createTraffic(30_000), 600_000).candidates, rs);
  });
});

describe('shortlist: the router on a large fleet', () => {
  it('a session over its replica\'s hard cap spills to the least loaded replica, with a failover list as long as the forwarder can use', () => {
    const rs = fleet(128, { inflight: 4 });
    const r = createRouter('affinity', { store: store(), now: () => T, random: prng(5) });
    const id = keyIdentity('caller');
    const first = r.route({ identity: id, replicas: rs });
    const home = first.ranked[0].name;
    r.served(id, { replica: home, result: 'ok', replicaTtftMs: 50, promptTokens: null, cachedTokens: null });
    // Its home far past the hard cap; one replica idle, far from the front of the list.
    rs.find((x) => x.name === home)!.inflight = 200;
    const idle = rs[rs.length - 7].name === home ? rs[rs.length - 8] : rs[rs.length - 7];
    idle.inflight = 0;
    const d = r.route({ identity: id, replicas: rs });
    assert.equal(d.reason, 'spill');
    assert.equal(d.ranked[0].name, idle.name);
    assert.equal(d.ranked.length, RANKED_MAX);
    assert.equal(new Set(d.ranked.map((x) => x.name)).size, RANKED_MAX);
  });
});

describe('pickers: one-pass cheapest and a bounded failover list', () => {
  it('cheapestByCost is rankByCost\'s first, with the same random draws', () => {
    const gen = prng(11);
    for (let k = 0; k < 500; k++) {
      const n = 1 + Math.floor(gen() * 40);
      // Few distinct costs, so that ties are common.
      const cost = Array.from({ length: n }, () => Math.floor(gen() * 6) * 0.5);
      const mask = Array.from({ length: n }, () => gen() < 0.8);
      const tie = [0, 0.5, 1][k % 3];
      const a = prng(k), b = prng(k);
      const want = rankByCost(cost, (i) => mask[i], tie, a)[0] ?? -1;
      assert.equal(cheapestByCost(cost, (i) => mask[i], tie, b), want);
      assert.equal(a(), b(), 'the same number of draws');
    }
  });

  it('rankCheapest is rankByCost\'s first `limit`, cheapest first', () => {
    const gen = prng(12);
    for (let k = 0; k < 300; k++) {
      const n = 1 + Math.floor(gen() * 60);
      const cost = Array.from({ length: n }, () => gen() * 100);
      const got = rankCheapest(cost, () => true, 0, prng(k), 11);
      assert.deepEqual(got, rankByCost(cost, () => true, 0, prng(k)).slice(0, 11));
    }
  });
});

describe('traffic: decayed by one factor per decision', () => {
  it('keeps the sum of every replica\'s count, less those forgotten', () => {
    const tr = createTraffic(30_000);
    let t = 1_700_000_000_000;
    for (let i = 0; i < 300; i++) tr.served(`r${i % 7}`, (t += 997));
    tr.forget('r3');
    const want = ['r0', 'r1', 'r2', 'r4', 'r5', 'r6'].reduce((n, r) => n + tr.of(r, t), 0);
    assert.ok(Math.abs(tr.totalRaw() * tr.decay(t) - want) < 1e-9 * want);
    assert.equal(tr.size(), 6);
  });

  it('raw × decay is the decayed count, across epochs hours apart', () => {
    const h = 30_000;
    const tr = createTraffic(h);
    const events: [string, number][] = [];
    let t = 1_700_000_000_000;
    const gen = prng(3);
    for (let i = 0; i < 2000; i++) {
      t += Math.floor(gen() * 60_000);
      events.push([`r${i % 3}`, t]);
      tr.served(`r${i % 3}`, t);
    }
    for (const name of ['r0', 'r1', 'r2']) {
      const want = events.filter(([n]) => n === name).reduce((v, [, at]) => v + 2 ** (-(t - at) / h), 0);
      const got = tr.of(name, t);
      assert.ok(Math.abs(got - want) <= 1e-9 * Math.max(1, want), `${name}: ${got} vs ${want}`);
      assert.ok(Math.abs(tr.raw(name) * tr.decay(t) - got) <= 1e-12 * Math.max(1, got));
    }
  });
});

describe('working set: the fleet\'s agents without a copy', () => {
  it('agentTokens and hasAgent agree with agents()', () => {
    const ws = createWorkingSet({ windowMs: 1000, maxSessions: 100 });
    ws.touch('s1', 'r0', { key: 'a', tokens: 500 }, 600, 0);
    ws.touch('s2', 'r1', { key: 'a', tokens: 500 }, 700, 10);
    ws.touch('s3', 'r1', { key: 'b', tokens: 200 }, 300, 20);
    const sum = (t: number) => [...ws.agents(t).values()].reduce((n, v) => n + v, 0);
    assert.equal(ws.agentTokens(30), sum(30));
    assert.equal(ws.agentTokens(30), 700);
    assert.ok(ws.hasAgent('b', 30) && !ws.hasAgent('c', 30));
    // s3 moves off agent b, then everything expires.
    ws.touch('s3', 'r0', { key: 'a', tokens: 500 }, 600, 40);
    assert.equal(ws.agentTokens(50), 500);
    assert.equal(ws.hasAgent('b', 50), false);
    assert.equal(ws.agentTokens(5_000), 0);
  });
});

describe('context: KV capacities are read again when they can have changed', () => {
  it('a new replica list at once, the same list a second later', () => {
    const seen: [string, number | null][] = [];
    const index = { setCapacity: (r: string, c: number | null) => void seen.push([r, c]), match: () => new Map() } as unknown as PrefixIndex;
    const d: ContextDeps = {
      store: store(), index, broken: { avoid: () => null } as never,
      pressure: { forDecision: () => () => false } as never,
      options: () => ({ prefixTtlMs: 600_000 }) as never, capacities: new Map(), capacityRead: capacityReading(),
      adapters: createAdapterRecency(() => 0, () => 30_000),
    };
    const rs = fleet(3, { kvCapacityTokens: 1000 });
    buildContext(d, keyIdentity('s'), rs, T, true);
    assert.equal(seen.length, 3);
    rs[0].kvCapacityTokens = 2000;
    buildContext(d, keyIdentity('s'), rs, T + CAPACITY_REREAD_MS - 1, true);
    assert.equal(seen.length, 3, 'not per request');
    buildContext(d, keyIdentity('s'), rs, T + CAPACITY_REREAD_MS, true);
    assert.deepEqual(seen.slice(3), [['r0', 2000], ['r1', 1000], ['r2', 1000]]);
    assert.equal(d.capacities.get('r0'), 2000);
    rs.push(...fleet(1, { kvCapacityTokens: 500 }).map((r) => ({ ...r, name: 'r3' })));
    buildContext(d, keyIdentity('s'), rs, T + CAPACITY_REREAD_MS + 1, true);
    assert.deepEqual(seen.at(-1), ['r3', 500], 'a replica that joined is read at once');
  });
});
