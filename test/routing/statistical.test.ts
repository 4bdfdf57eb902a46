import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { rendezvousRank } from '../../src/routing/rendezvous.js';
import { createRouter, type Strategy } from '../../src/routing/router.js';
import type { RequestIdentity } from '../../src/identify/identity.js';
import type { Router } from '../../src/routing/types.js';
import { isConversationKey } from '../../src/store/types.js';
import { chatIdentity, conversation, fleet, keyIdentity, prng, store, words, type MutableReplica } from './helpers.js';

const keys = (n: number, tag = 'session') => Array.from({ length: n }, (_, i) => `${tag}-${i}`);

function place(strategy: Strategy, replicas: MutableReplica[], ks: string[], seed = 1): Map<string, string> {
  const router = createRouter(strategy, { store: store(), random: prng(seed) });
  const out = new Map<string, string>();
  for (const k of ks) out.set(k, router.route({ identity: keyIdentity(k), replicas }).ranked[0].name);
  return out;
}

describe('statistical: removing 1 of N replicas', () => {
  for (const strategy of ['affinity', 'session-hash'] as const) {
    it(`${strategy}: only the removed replica's keys move, and no more than 1/N + 2% of all keys`, () => {
      const n = 10;
      const all = fleet(n);
      const ks = keys(10_000);
      const before = place(strategy, all, ks);
      for (const gone of ['r0', 'r3', 'r7']) {
        const after = place(strategy, all.filter((r) => r.name !== gone), ks);
        let moved = 0;
        for (const k of ks) {
          if (after.get(k) === before.get(k)) continue;
          moved++;
          assert.equal(before.get(k), gone, `${k} moved from ${before.get(k)}, which stayed`);
        }
        assert.ok(moved / ks.length <= 1 / n + 0.02, `${gone}: ${((100 * moved) / ks.length).toFixed(1)}% moved`);
      }
    });
  }

  it('affinity with live pins: sessions elsewhere stay pinned, the removed replica’s sessions fail over', () => {
    const replicas = fleet(6);
    const router = createRouter('affinity', { store: store(), random: prng(2) });
    const home = new Map<string, string>();
    for (const k of keys(3000)) {
      const id = keyIdentity(k);
      const d = router.route({ identity: id, replicas });
      router.served(id, { replica: d.ranked[0].name, result: 'ok', replicaTtftMs: 50, promptTokens: null, cachedTokens: null });
      home.set(k, d.ranked[0].name);
    }
    const remaining = replicas.filter((r) => r.name !== 'r2');
    for (const [k, was] of home) {
      const d = router.route({ identity: keyIdentity(k), replicas: remaining });
      if (was === 'r2') assert.equal(d.reason, 'failover');
      else assert.deepEqual([d.reason, d.ranked[0].name], ['pinned', was]);
    }
  });
});

describe('statistical: bounded load on skewed keys', () => {
  // The worst skew: every key's first choice (rendezvous for affinity, the ring for session-hash)
  // is the same replica.
  const n = 8;
  const pool = keys(60_000, 'hot');
  const firstChoice = place('session-hash', fleet(n), pool);
  const skewedFor = (strategy: Strategy) => strategy === 'affinity'
    ? pool.filter((k) => rendezvousRank(k, fleet(n))[0].name === 'r0').slice(0, 800)
    : pool.filter((k) => firstChoice.get(k) === 'r0').slice(0, 800);

  function inflightAfter(strategy: Strategy): number[] {
    const skewed = skewedFor(strategy);
    assert.equal(skewed.length, 800);
    const replicas = fleet(n);
    const router = createRouter(strategy, { store: store(), random: prng(3) });
    for (const k of skewed) (router.route({ identity: keyIdentity(k), replicas }).ranked[0] as MutableReplica).inflight++;
    return replicas.map((r) => r.inflight);
  }

  it('affinity: new placements keep max/avg ≤ c = 1.25 while every key prefers one replica', () => {
    const load = inflightAfter('affinity');
    const avg = 800 / n;
    assert.ok(Math.max(...load) / avg <= 1.25, `max/avg = ${Math.max(...load) / avg} (${load})`);
  });

  it('session-hash (no bound) puts them all on one replica: the bound is what keeps them apart', () => {
    assert.equal(Math.max(...inflightAfter('session-hash')), 800);
  });
});

describe('statistical: keyless conversations stay where their cache is', () => {
  /**
   * 400 keyless voice calls of 6–14 turns over 6 replicas, sharing one ~1.5K-token system prompt,
   * with overlapping lifetimes (Poisson-ish arrivals, 2–4 s per answer, 3–9 s of caller speech
   * between turns). Replica TTFT follows the seed figures: 30 ms + 0.13 ms per uncached token.
   */
  function replay(options: object, conversationPins = true): { sticky: number; followUps: number } {
    const rand = prng(11);
    const replicas = fleet(6);
    let clock = 0;
    const pins = store();
    // Without conversation pins: a store that forgets where keyless conversations were served.
    const s = conversationPins ? pins : { ...pins, pin: (k: string, ...rest: [string, number, number]) => { if (!isConversationKey(k)) pins.pin(k, ...rest); } };
    const router: Router = createRouter('affinity', { store: s, now: () => clock, random: prng(12), options });
    const system = words(800, prng(13));
    type Ev = { at: number; run: () => void };
    const events: Ev[] = [];
    const schedule = (at: number, run: () => void) => events.push({ at, run });
    let sticky = 0;
    let followUps = 0;
    for (let c = 0; c < 400; c++) {
      const turns = 6 + Math.floor(rand() * 9);
      const conv = conversation(system, turns, prng(1000 + c));
      let prev: string | null = null;
      const turn = (t: number) => {
        const identity: RequestIdentity = chatIdentity(conv.messages(t));
        const d = router.route({ identity, replicas });
        const r = d.ranked[0] as MutableReplica;
        if (prev !== null) {
          followUps++;
          if (r.name === prev) sticky++;
        }
        prev = r.name;
        const ttft = 30 + 0.13 * (identity.promptTokens - d.matchedTokens) + 50 * r.waiting;
        r.inflight++;
        router.served(identity, { replica: r.name, result: 'ok', replicaTtftMs: ttft, promptTokens: null, cachedTokens: null });
        schedule(clock + ttft + 2000 + rand() * 2000, () => {
          r.inflight--;
          if (t < turns) schedule(clock + 3000 + rand() * 6000, () => turn(t + 1));
        });
      };
      schedule(c * 150 + rand() * 150, () => turn(1));
    }
    while (events.length > 0) {
      let next = 0;
      for (let i = 1; i < events.length; i++) if (events[i].at < events[next].at) next = i;
      const [ev] = events.splice(next, 1);
      clock = ev.at;
      ev.run();
    }
    return { sticky, followUps };
  }

  it('≥ 95% of follow-up turns go to the replica that served the previous turn', () => {
    const { sticky, followUps } = replay({});
    console.log(`# keyless replay: ${sticky}/${followUps} follow-ups stayed (${((100 * sticky) / followUps).toFixed(1)}%)`);
    assert.ok(followUps > 3000);
    assert.ok(sticky / followUps >= 0.95, `${((100 * sticky) / followUps).toFixed(1)}%`);
  });

  it('without the prefix index and conversation pins (placement by first turn alone) the same replay falls short', () => {
    const { sticky, followUps } = replay({ prefixMaxEntries: 0 }, false);
    console.log(`# keyless replay without the index: ${((100 * sticky) / followUps).toFixed(1)}%`);
    assert.ok(sticky / followUps < 0.95, `${((100 * sticky) / followUps).toFixed(1)}%`);
  });

  it('conversation pins alone (no prefix index) keep them too: what another gateway relies on', () => {
    const { sticky, followUps } = replay({ prefixMaxEntries: 0 });
    assert.ok(sticky / followUps >= 0.95, `${((100 * sticky) / followUps).toFixed(1)}%`);
  });
});

describe('statistical: two gateways, no shared store', () => {
  it('place the same keyed sessions identically, turn after turn, whatever else each has seen', () => {
    const replicas = fleet(7);
    const a = createRouter('affinity', { store: store(), random: prng(21) });
    const b = createRouter('affinity', { store: store(), random: prng(22) });
    const system = words(300, prng(23));
    const served = (g: Router, id: RequestIdentity, replica: string) =>
      g.served(id, { replica, result: 'ok', replicaTtftMs: 60, promptTokens: null, cachedTokens: null });
    // Gateway a alone has already carried the same conversations, keyless and under other keys:
    // its prefix index knows where they are warm, b's does not.
    for (let s = 0; s < 300; s++) {
      const conv = conversation(system, 3, prng(s));
      for (let t = 1; t <= 3; t++) {
        for (const key of [null, `earlier-${s}`]) {
          const id = chatIdentity(conv.messages(t), key);
          served(a, id, a.route({ identity: id, replicas }).ranked[0].name);
        }
      }
    }
    for (let s = 0; s < 1500; s++) {
      const conv = conversation(system, 3, prng(s));
      for (let t = 1; t <= 3; t++) {
        const id = chatIdentity(conv.messages(t), `call-${s}`);
        const da = a.route({ identity: id, replicas });
        const db = b.route({ identity: id, replicas });
        assert.equal(da.ranked[0].name, db.ranked[0].name, `call-${s} turn ${t}`);
        assert.equal(da.reason, db.reason);
        served(a, id, da.ranked[0].name);
        served(b, id, db.ranked[0].name);
        const r = da.ranked[0] as MutableReplica;
        r.inflight = (r.inflight + 1) % 3; // the same load, seen by both
      }
    }
  });
});
