import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createVirtualClock } from '../../bench/scale/des/clock.js';
import { INFLIGHT_KEEPALIVE_MS, PEER_SILENT_MS, sharePeerInflight, type PeerInflightShare } from '../../src/fleet/peer-inflight.js';
import { createSessionActivity } from '../../src/store/redis-activity.js';
import type { PeerInflight } from '../../src/store/types.js';

/** Gateways on one channel in virtual time: each one's own counts set by hand, what it applies recorded. */
function gateways(n: number, intervalMs = 100) {
  const clock = createVirtualClock();
  const listeners = new Map<number, (p: PeerInflight) => void>();
  const sent = new Array<number>(n).fill(0);
  const own = Array.from({ length: n }, () => new Map<string, number>());
  const applied = Array.from({ length: n }, () => new Map<string, number>());
  const alive = new Array<boolean>(n).fill(true);
  const shares: PeerInflightShare[] = own.map((counts, g) => sharePeerInflight({
    store: {
      announceInflight(c) {
        // A gateway killed mid-flight says nothing more.
        if (!alive[g]) return;
        sent[g]++;
        const peer = { instance: `g${g}`, counts: new Map(c) };
        clock.setTimeout(() => { for (const [h, l] of listeners) if (h !== g) l(peer); }, 1);
      },
      onPeerInflight(l) { listeners.set(g, l); },
    },
    own: () => [...counts].map(([name, inflight]) => ({ name, inflight })),
    apply: (name, m) => applied[g].set(name, m),
    now: () => clock.now(),
    later: (fn, ms) => void clock.setTimeout(fn, ms),
    intervalMs,
  }));
  return { clock, own, applied, sent, alive, shares, until: (ms: number) => clock.run(clock.now() + ms) };
}

describe('open requests shared among gateways', () => {
  it('each gateway sees the others’ open requests per replica, summed, within a batch interval', () => {
    const f = gateways(3);
    f.own[0].set('r1', 3);
    f.own[1].set('r1', 2);
    f.own[1].set('r2', 1);
    f.until(150);
    assert.deepEqual(Object.fromEntries(f.applied[2]), { r1: 5, r2: 1 });
    assert.deepEqual(Object.fromEntries(f.applied[0]), { r1: 2, r2: 1 }, 'its own are not among them');
    f.own[1].delete('r2');
    f.own[0].set('r1', 1);
    f.until(150);
    assert.deepEqual(Object.fromEntries(f.applied[2]), { r1: 3, r2: 0 }, 'a replica left with none is set back to 0');
    for (const s of f.shares) s.close();
  });

  it('unchanged counts are said again only to show the gateway alive; a gateway with none open goes quiet', () => {
    const f = gateways(2);
    f.own[0].set('r1', 1);
    f.until(1_000 - 1);
    assert.equal(f.sent[0], 1);
    f.until(INFLIGHT_KEEPALIVE_MS + 100);
    assert.equal(f.sent[0], 2);
    f.own[0].delete('r1');
    f.until(200);
    assert.equal(f.sent[0], 3, 'the change to none is sent');
    f.until(10_000);
    assert.equal(f.sent[0], 3, 'and then nothing');
    assert.equal(f.applied[1].get('r1'), 0);
    for (const s of f.shares) s.close();
  });

  it('a gateway gone silent with requests open (killed) stops weighing on the replica after PEER_SILENT_MS', () => {
    const f = gateways(2);
    f.own[0].set('r1', 4);
    f.until(150);
    assert.equal(f.applied[1].get('r1'), 4);
    f.alive[0] = false;
    f.until(PEER_SILENT_MS - 500);
    assert.equal(f.applied[1].get('r1'), 4, 'still believed within the bound');
    f.until(1_500);
    assert.equal(f.applied[1].get('r1'), 0);
    assert.equal(f.shares[1].peers(), 0);
    for (const s of f.shares) s.close();
  });
});

describe('open requests on the activity channel', () => {
  it('go out whole as one message another gateway reads back; malformed ones are skipped whole', async () => {
    const published: string[] = [];
    const counts = { sent: 0, heard: 0, malformed: 0 };
    const make = (instance: string) => createSessionActivity({
      instance, flushMs: 5, maxPending: 100, now: () => 1_000,
      publish: async (m) => { published.push(m); },
      failed: () => {}, sent: () => {}, sentAdapters: () => {}, heardAdapters: () => {},
      sentInflight: () => { counts.sent++; }, heardInflight: () => { counts.heard++; }, malformed: () => { counts.malformed++; },
    });
    const a = make('ga');
    const b = make('gb');
    const heard: PeerInflight[] = [];
    b.onPeerInflight((p) => heard.push(p));
    a.onPeerInflight(() => assert.fail('its own message'));
    a.announceInflight(new Map([['r1', 2], ['r2', 0], ['r3', 1]]));
    await Promise.resolve();
    assert.deepEqual(published, ['f|ga|[["r1",2],["r3",1]]']);
    assert.equal(counts.sent, 1);
    for (const m of published) { a.receive(m); b.receive(m); }
    assert.deepEqual(heard.map((p) => [p.instance, [...p.counts]]), [['ga', [['r1', 2], ['r3', 1]]]]);
    for (const bad of ['f|gx|{}', 'f|gx|[["r1",-1]]', 'f|gx|[["r1",1.5]]', 'f|gx|[["r1"]]', 'f|gx|[["r1",1],[2,1]]', 'f|gx|nope']) b.receive(bad);
    assert.equal(heard.length, 1);
    assert.equal(counts.malformed, 6);
    assert.equal(counts.heard, 1);
  });
});
