import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isWarmrouteError } from '../../src/errors.js';
import { createRouter } from '../../src/routing/router.js';
import type { RequestIdentity } from '../../src/identify/identity.js';
import type { Router } from '../../src/routing/types.js';
import { chatIdentity, conversation, fleet, keyIdentity, prng, replica, store, words, type MutableReplica } from './helpers.js';

const SYSTEM = words(800, prng(99)); // ~1.5K tokens of shared system prompt

function setup(n = 4, options = {}) {
  let clock = 1_000_000;
  const replicas = fleet(n);
  const router = createRouter('affinity', { store: store(), now: () => clock, random: prng(5), options });
  const send = (identity: RequestIdentity, ttft = 80) => {
    const d = router.route({ identity, replicas });
    router.served(identity, { replica: d.ranked[0].name, result: 'ok', replicaTtftMs: ttft, promptTokens: null, cachedTokens: null });
    return d;
  };
  return { replicas, router, send, tick: (ms: number) => (clock += ms) };
}
const byName = (rs: MutableReplica[], name: string) => rs.find((r) => r.name === name) as MutableReplica;

describe('affinity: keyed sessions', () => {
  it('placed, then pinned to the same replica with its prompt counted warm', () => {
    const { router, send, tick } = setup();
    const conv = conversation(SYSTEM, 3, prng(1));
    const first = send(chatIdentity(conv.messages(1), 'call-1'));
    assert.equal(first.reason, 'placed');
    tick(5000);
    const second = send(chatIdentity(conv.messages(2), 'call-1'));
    assert.equal(second.reason, 'pinned');
    assert.equal(second.ranked[0].name, first.ranked[0].name);
    assert.equal(second.matchedTokens, chatIdentity(conv.messages(1)).promptTokens);
    assert.ok(typeof second.estimatedTtftMs === 'number' && second.estimatedTtftMs > 0);
    const info = router.session('call-1');
    assert.equal(info?.replica, first.ranked[0].name);
    assert.equal(info?.warmTokens, chatIdentity(conv.messages(2)).promptTokens);
  });

  it('unpin forgets the session: the next request is placed again', () => {
    const { router, send } = setup();
    send(keyIdentity('call-2'));
    assert.equal(router.unpin('call-2'), true);
    assert.equal(router.session('call-2'), null);
    assert.equal(send(keyIdentity('call-2')).reason, 'placed');
  });

  it('the admin view reports nothing warm once the prefix TTL has passed', () => {
    const { router, send, tick } = setup(4, { prefixTtlMs: 60_000 });
    send(chatIdentity(conversation(SYSTEM, 1, prng(2)).messages(1), 'call-3'));
    tick(61_000);
    assert.equal(router.session('call-3')?.warmTokens, 0);
  });

  it('pinned replica down: failover to another, which becomes the new pin', () => {
    const { replicas, router, send } = setup();
    const home = send(keyIdentity('call-4')).ranked[0].name;
    byName(replicas, home).up = false;
    const d = send(keyIdentity('call-4'));
    assert.equal(d.reason, 'failover');
    assert.notEqual(d.ranked[0].name, home);
    assert.equal(router.session('call-4')?.replica, d.ranked[0].name);
    assert.equal(send(keyIdentity('call-4')).reason, 'pinned');
  });

  it('over the hard cap: spill, re-pin, and no bounce back when the old replica frees up', () => {
    const { replicas, router, send, tick } = setup(4, { hardCapMin: 4 });
    const conv = conversation(SYSTEM, 4, prng(3));
    const home = send(chatIdentity(conv.messages(1), 'call-5')).ranked[0].name;
    tick(5000);
    byName(replicas, home).inflight = 4;
    const spilled = send(chatIdentity(conv.messages(2), 'call-5'));
    assert.equal(spilled.reason, 'spill');
    assert.notEqual(spilled.ranked[0].name, home);
    assert.equal(router.session('call-5')?.replica, spilled.ranked[0].name);
    byName(replicas, home).inflight = 0;
    for (let turn = 3; turn <= 4; turn++) {
      tick(5000);
      const d = send(chatIdentity(conv.messages(turn), 'call-5'));
      assert.equal(d.reason, 'pinned');
      assert.equal(d.ranked[0].name, spilled.ranked[0].name);
    }
  });

  it('the cost model spills a short session off a long vLLM queue but keeps a long warm one', () => {
    const { replicas, send, tick } = setup();
    const short = chatIdentity([{ role: 'user', content: 'hi' }], 'short');
    const long = chatIdentity([{ role: 'system', content: words(5000, prng(4)) }, { role: 'user', content: 'hi' }], 'long');
    const homeShort = send(short).ranked[0].name;
    const homeLong = send(long).ranked[0].name;
    tick(60_000); // past the cooldown
    for (const r of replicas) r.waiting = 0;
    byName(replicas, homeShort).waiting = 6;
    assert.equal(send(short).reason, 'spill');
    for (const r of replicas) r.waiting = 0;
    byName(replicas, homeLong).waiting = 6;
    const d = send(long);
    assert.equal(d.reason, 'pinned', '6 × 50 ms of queue is cheaper than re-prefilling ~9K tokens');
  });
});

describe('affinity: keyless conversations', () => {
  it('follow-up turns find the replica holding the conversation (reason prefix)', () => {
    const { send, tick } = setup();
    const conv = conversation(SYSTEM, 5, prng(6));
    const first = send(chatIdentity(conv.messages(1)));
    assert.equal(first.reason, 'placed');
    for (let turn = 2; turn <= 5; turn++) {
      tick(4000);
      const d = send(chatIdentity(conv.messages(turn)));
      assert.equal(d.reason, 'prefix');
      assert.equal(d.ranked[0].name, first.ranked[0].name);
      assert.equal(d.matchedTokens, chatIdentity(conv.messages(turn - 1)).promptTokens);
    }
  });

  it('a shared system prompt alone is not a match: new conversations spread by their first user turn', () => {
    const { send } = setup(4);
    const counts = new Map<string, number>();
    for (let c = 0; c < 200; c++) {
      const d = send(chatIdentity(conversation(SYSTEM, 1, prng(100 + c)).messages(1)));
      assert.equal(d.reason, 'placed');
      counts.set(d.ranked[0].name, (counts.get(d.ranked[0].name) ?? 0) + 1);
    }
    assert.equal(counts.size, 4);
    for (const n of counts.values()) assert.ok(n > 30, `${[...counts]}`);
  });

  it('a keyless conversation that just moved does not move back for cost reasons until its cooldown ends', () => {
    // Traffic decays at once here: this is about the cooldown, not the bound on recent traffic.
    const { replicas, send, tick } = setup(4, { hardCapMin: 4, spillCooldownMs: 10_000, trafficHalfLifeMs: 1 });
    const conv = conversation(SYSTEM, 6, prng(11));
    const home = send(chatIdentity(conv.messages(1))).ranked[0].name;
    tick(20_000);
    // Over the hard cap at home: the conversation spills.
    byName(replicas, home).inflight = 4;
    const moved = send(chatIdentity(conv.messages(2)));
    assert.equal(moved.reason, 'spill');
    const away = moved.ranked[0].name;
    byName(replicas, home).inflight = 0;
    // Its new replica now looks slow (but under the hard cap); the old one, holding all but the
    // last turn, looks cheap.
    byName(replicas, away).waiting = 3;
    tick(2_000);
    const held = send(chatIdentity(conv.messages(3)));
    assert.equal(held.reason, 'prefix', 'moved back within the cooldown');
    assert.equal(held.ranked[0].name, away);
    // Past the cooldown the cost model may move it again.
    tick(11_000);
    assert.equal(send(chatIdentity(conv.messages(4))).reason, 'spill');
  });

  it('the cooldown is shared: another gateway does not move a conversation that just came to its replica', () => {
    // Two routers on one store, as two gateways on one Redis: A places the conversation, B serves
    // its next turns. B's own move log knows nothing of it; the shared conversation record does.
    let clock = 1_000_000;
    const replicas = fleet(4);
    const shared = store();
    const options = { spillCooldownMs: 10_000, trafficHalfLifeMs: 1 };
    const a = createRouter('affinity', { store: shared, now: () => clock, random: prng(5), options });
    const b = createRouter('affinity', { store: shared, now: () => clock, random: prng(6), options });
    // No TTFT reported: what the cost model has learned stays its prior, so only the cooldown decides.
    const send = (router: Router, identity: RequestIdentity) => {
      const d = router.route({ identity, replicas });
      router.served(identity, { replica: d.ranked[0].name, result: 'ok', replicaTtftMs: null, promptTokens: null, cachedTokens: null });
      return d;
    };
    const conv = conversation(SYSTEM, 4, prng(13));
    const home = send(a, chatIdentity(conv.messages(1))).ranked[0].name;
    // A momentary queue at home, the others idle: worth a move to the cost model once the cooldown is over.
    byName(replicas, home).waiting = 12;
    clock += 2_000;
    const held = send(b, chatIdentity(conv.messages(2)));
    assert.equal(held.ranked[0].name, home, `moved by the other gateway within the cooldown (${held.reason})`);
    clock += 11_000;
    assert.equal(send(b, chatIdentity(conv.messages(3))).reason, 'spill', 'past the cooldown the cost model may move it');
  });

  it('new conversations avoid a replica carrying more than its share of recent traffic, with nothing in flight', () => {
    const { send, tick } = setup(4);
    // A busy keyed session keeps one replica well above its share of requests.
    const busy = chatIdentity(conversation(SYSTEM, 1, prng(12)).messages(1), 'busy');
    const hot = send(busy).ranked[0].name;
    for (let i = 0; i < 60; i++) {
      tick(100);
      send(busy);
    }
    const placed = new Map<string, number>();
    for (let c = 0; c < 40; c++) {
      tick(100);
      const d = send(chatIdentity(conversation(SYSTEM, 1, prng(300 + c)).messages(1)));
      assert.equal(d.reason, 'placed');
      placed.set(d.ranked[0].name, (placed.get(d.ranked[0].name) ?? 0) + 1);
    }
    assert.equal(placed.get(hot) ?? 0, 0, `placements: ${[...placed]}`);
    assert.equal(placed.size, 3);
  });

  it('forgetReplica (a restart): the conversation is no longer believed warm there', () => {
    const { router, send } = setup();
    const conv = conversation(SYSTEM, 2, prng(7));
    const home = send(chatIdentity(conv.messages(1))).ranked[0].name;
    router.forgetReplica?.(home);
    const d = send(chatIdentity(conv.messages(2)));
    assert.equal(d.reason, 'placed');
    assert.equal(d.matchedTokens, 0);
  });
});

describe('affinity: learning and errors', () => {
  it('served() feeds the cost model, preferring the usage chunk’s cached tokens', () => {
    const { router, replicas } = setup(2);
    const id = chatIdentity(conversation(SYSTEM, 1, prng(8)).messages(1), 'call-9');
    for (let i = 0; i < 50; i++) {
      const d = router.route({ identity: id, replicas });
      // 2,000 uncached of 3,000 prompt tokens took 530 ms: 30 + 0.25 ms/token.
      router.served(id, { replica: d.ranked[0].name, result: 'ok', replicaTtftMs: 530, promptTokens: 3000, cachedTokens: 1000 });
    }
    const stats = (router as Required<Router>).stats();
    const cost = stats.costByReplica.get(router.session('call-9')?.replica as string);
    assert.equal(cost?.samples, 50);
    assert.ok(cost && cost.prefillMsPerToken > 0.17, `${cost?.prefillMsPerToken}`);
    assert.ok(stats.tokenScale > 1, 'reported 3,000 tokens vs a smaller estimate');
    assert.ok(stats.prefixEntries > 0);
  });

  it('a failed attempt records nothing', () => {
    const { router, replicas } = setup(2);
    const id = chatIdentity(conversation(SYSTEM, 1, prng(9)).messages(1), 'call-10');
    const d = router.route({ identity: id, replicas });
    router.served(id, { replica: d.ranked[0].name, result: 'error', replicaTtftMs: null, promptTokens: null, cachedTokens: null });
    assert.equal(router.session('call-10'), null);
    assert.equal((router as Required<Router>).stats().prefixEntries, 0);
  });

  it('unknown model: 404 model_not_found', () => {
    const router = createRouter('affinity', { store: store() });
    const replicas = [replica('a', { models: new Set(['m']) })];
    assert.throws(() => router.route({ identity: { ...keyIdentity(null), model: 'nope' }, replicas }), (e: unknown) => isWarmrouteError(e) && e.openaiCode === 'model_not_found');
  });

  it('options are checked when the router is created', () => {
    assert.throws(() => createRouter('affinity', { store: store(), options: { loadFactor: 0.9 } }), /loadFactor/);
  });
});

describe('affinity: a response that broke off mid-stream', () => {
  const interrupted = (router: Router, identity: RequestIdentity, replica: string) =>
    router.served(identity, { replica, result: 'interrupted', replicaTtftMs: 40, promptTokens: null, cachedTokens: null });

  it('keyed: the next turn is placed elsewhere as a failover, and pinned there afterwards', () => {
    const { router, replicas, send, tick } = setup();
    const conv = conversation(SYSTEM, 4, prng(21));
    const home = send(chatIdentity(conv.messages(1), 'call-broken')).ranked[0].name;
    tick(3000);
    const id2 = chatIdentity(conv.messages(2), 'call-broken');
    const d2 = router.route({ identity: id2, replicas });
    assert.equal(d2.reason, 'pinned');
    interrupted(router, id2, home);
    assert.equal(router.session('call-broken')?.replica, home, 'an interrupted response does not move the pin by itself');
    tick(3000);
    const d3 = send(chatIdentity(conv.messages(3), 'call-broken'));
    assert.equal(d3.reason, 'failover');
    assert.notEqual(d3.ranked[0].name, home);
    assert.equal(router.session('call-broken')?.replica, d3.ranked[0].name);
    tick(3000);
    assert.equal(send(chatIdentity(conv.messages(4), 'call-broken')).reason, 'pinned');
  });

  it('keyless: the next turn leaves the replica holding its prefix, as a failover', () => {
    const { router, replicas, send, tick } = setup();
    const conv = conversation(SYSTEM, 4, prng(22));
    const home = send(chatIdentity(conv.messages(1))).ranked[0].name;
    tick(3000);
    const id2 = chatIdentity(conv.messages(2));
    assert.equal(router.route({ identity: id2, replicas }).reason, 'prefix');
    interrupted(router, id2, home);
    tick(3000);
    const d3 = send(chatIdentity(conv.messages(3)));
    assert.equal(d3.reason, 'failover');
    assert.notEqual(d3.ranked[0].name, home);
    tick(3000);
    const d4 = send(chatIdentity(conv.messages(4)));
    assert.equal(d4.reason, 'prefix');
    assert.equal(d4.ranked[0].name, d3.ranked[0].name);
  });
});
