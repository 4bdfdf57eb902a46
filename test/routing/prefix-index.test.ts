import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { createPrefixIndex } from '../../src/routing/prefix-index.js';

/** Chain of n links named `${tag}-i`, 100 tokens each. */
function chain(tag: string, n: number): [string[], number[]] {
  return [Array.from({ length: n }, (_, i) => `${tag}-${i}`), Array.from({ length: n }, (_, i) => (i + 1) * 100)];
}

const big = { maxEntries: 10_000, ttlMs: 60_000 };

describe('prefix index: longest match', () => {
  const cases: { name: string; served: [string, number, string][]; query: [string, number]; want: Record<string, number> }[] = [
    { name: 'nothing recorded', served: [], query: ['a', 5], want: {} },
    { name: 'exact chain', served: [['a', 5, 'r0']], query: ['a', 5], want: { r0: 500 } },
    { name: 'follow-up turn: the previous chain is a prefix', served: [['a', 3, 'r0']], query: ['a', 5], want: { r0: 300 } },
    { name: 'shorter query than recorded', served: [['a', 5, 'r0']], query: ['a', 2], want: { r0: 200 } },
    { name: 'per replica, each its own longest', served: [['a', 2, 'r1'], ['a', 4, 'r0']], query: ['a', 5], want: { r0: 400, r1: 200 } },
    { name: 'a different conversation does not match', served: [['b', 5, 'r0']], query: ['a', 5], want: {} },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const idx = createPrefixIndex(big);
      for (const [tag, n, r] of c.served) idx.record(...chain(tag, n), r, 0);
      assert.deepEqual(Object.fromEntries(idx.match(...chain(...c.query), 0)), c.want);
    });
  }

  it('stops scanning once `want` replicas matched', () => {
    const idx = createPrefixIndex(big);
    idx.record(...chain('a', 2), 'r1', 0);
    idx.record(...chain('a', 4), 'r0', 0);
    assert.deepEqual(Object.fromEntries(idx.match(...chain('a', 5), 0, 1)), { r0: 400 });
  });

  it('re-recording the same chain adds no entries', () => {
    const idx = createPrefixIndex(big);
    idx.record(...chain('a', 5), 'r0', 0);
    idx.record(...chain('a', 5), 'r0', 1);
    assert.equal(idx.size(), 5);
    assert.deepEqual(Object.fromEntries(idx.tokensByReplica()), { r0: 500 });
  });
});

describe('prefix index: bounds', () => {
  it('TTL: an entry not refreshed within ttlMs no longer matches', () => {
    const idx = createPrefixIndex({ maxEntries: 100, ttlMs: 1000 });
    idx.record(...chain('a', 3), 'r0', 0);
    assert.deepEqual(Object.fromEntries(idx.match(...chain('a', 3), 1000)), { r0: 300 });
    assert.deepEqual(Object.fromEntries(idx.match(...chain('a', 3), 1001)), {});
    idx.record(...chain('b', 1), 'r0', 5000); // a write sweeps expired entries out
    assert.equal(idx.size(), 1);
  });

  it('LRU by entries: the least recently served chain goes first', () => {
    const idx = createPrefixIndex({ maxEntries: 10, ttlMs: 60_000 });
    idx.record(...chain('a', 5), 'r0', 0);
    idx.record(...chain('b', 5), 'r0', 1);
    idx.record(...chain('a', 5), 'r0', 2); // a is fresh again
    idx.record(...chain('c', 5), 'r0', 3); // evicts b
    assert.equal(idx.size(), 10);
    assert.equal(idx.match(...chain('b', 5), 3).size, 0);
    assert.equal(idx.match(...chain('a', 5), 3).get('r0'), 500);
    assert.equal(idx.match(...chain('c', 5), 3).get('r0'), 500);
  });

  it("capacity: a replica's tokens never exceed its KV capacity; its oldest links go first, others untouched", () => {
    const idx = createPrefixIndex(big);
    idx.setCapacity('r0', 800);
    idx.record(...chain('a', 5), 'r0', 0);
    idx.record(...chain('a', 5), 'r1', 0);
    idx.record(...chain('b', 5), 'r0', 1);
    assert.deepEqual(Object.fromEntries(idx.tokensByReplica()), { r0: 800, r1: 500 });
    assert.equal(idx.match(...chain('a', 5), 1).get('r0'), 300, 'a was older on r0: it lost 200 tokens, from its tail');
    assert.equal(idx.match(...chain('a', 5), 1).get('r1'), 500);
    assert.equal(idx.match(...chain('b', 5), 1).get('r0'), 500);
  });

  it("capacity: within one prefix the tail is forgotten before the head (vLLM frees a request's blocks tail first)", () => {
    const idx = createPrefixIndex(big);
    idx.record(...chain('a', 10), 'r0', 0);
    idx.setCapacity('r0', 300);
    assert.equal(idx.match(...chain('a', 10), 0).get('r0'), 300);
  });

  it('unknown capacity (null or 0) does not bound', () => {
    const idx = createPrefixIndex(big);
    idx.setCapacity('r0', 100);
    idx.setCapacity('r0', null);
    idx.record(...chain('a', 10), 'r0', 0);
    assert.equal(idx.match(...chain('a', 10), 0).get('r0'), 1000);
  });

  it('forgetReplica drops only that replica', () => {
    const idx = createPrefixIndex(big);
    idx.record(...chain('a', 3), 'r0', 0);
    idx.record(...chain('a', 3), 'r1', 0);
    idx.forgetReplica('r0');
    assert.deepEqual(Object.fromEntries(idx.match(...chain('a', 3), 0)), { r1: 300 });
    assert.equal(idx.size(), 3);
  });

  it('maxEntries 0 disables the index', () => {
    const idx = createPrefixIndex({ maxEntries: 0, ttlMs: 1000 });
    idx.record(...chain('a', 3), 'r0', 0);
    assert.equal(idx.size(), 0);
    assert.equal(idx.match(...chain('a', 3), 0).size, 0);
  });

  it('survives churn past its bound with consistent bookkeeping', () => {
    const idx = createPrefixIndex({ maxEntries: 500, ttlMs: 60_000 });
    for (let s = 0; s < 400; s++) idx.record(...chain(`s${s % 97}`, 1 + (s % 13)), `r${s % 3}`, s);
    assert.ok(idx.size() <= 500);
    const total = [...idx.tokensByReplica().values()].reduce((a, b) => a + b, 0);
    assert.equal(total, idx.size() * 100);
  });
});

describe('prefix index: memory', () => {
  it('the default 640,000 entries (10,000 sessions × 30 turns × ~2 links) fit in < 100 MB', () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const entries = 640_000;
    const replicas = 8;
    gc();
    const before = process.memoryUsage();
    const idx = createPrefixIndex({ maxEntries: entries, ttlMs: 600_000 });
    // Realistic links: 16-hex-digit hashes, fresh strings as each request brings its own chain.
    const links: string[] = new Array(61);
    const tokens = Array.from({ length: 61 }, (_, i) => (i + 1) * 150);
    for (let s = 0; s < entries / 61 + 1; s++) {
      for (let i = 0; i < 61; i++) links[i] = (BigInt(s) * 1_000_003n + BigInt(i) * 7_919n + 0x1234_5678_9abc_def0n).toString(16);
      idx.record(links, tokens, `replica-${s % replicas}`, s);
    }
    gc();
    const after = process.memoryUsage();
    const bytes = after.heapUsed - before.heapUsed + (after.arrayBuffers - before.arrayBuffers);
    assert.equal(idx.size(), entries);
    const perEntry = bytes / entries;
    console.log(`# prefix index: ${entries} entries, ${(bytes / 1e6).toFixed(1)} MB, ${perEntry.toFixed(0)} B/entry`);
    assert.ok(bytes < 100e6, `${(bytes / 1e6).toFixed(1)} MB`);
  });
});

describe('prefix index: residency feedback and exact eviction', () => {
  it('forgetLinks: what the KV events say is evicted no longer matches on that replica only', () => {
    const idx = createPrefixIndex(big);
    idx.record(...chain('a', 4), 'r0', 0);
    idx.record(...chain('a', 4), 'r1', 0);
    idx.forgetLinks('r0', ['a-3', 'a-2']);
    assert.deepEqual(Object.fromEntries(idx.match(...chain('a', 4), 0)), { r0: 200, r1: 400 });
  });

  it('markExact: links matched to engine blocks keep past the TTL; the same replica\'s other links expire', () => {
    const idx = createPrefixIndex({ maxEntries: 100, ttlMs: 1000 });
    idx.record(...chain('a', 3), 'r0', 0);
    idx.record(...chain('b', 3), 'r0', 0);
    idx.record(...chain('a', 3), 'r1', 0);
    idx.markExact('r0', ['a-0', 'a-1', 'a-2'], true);
    idx.record(...chain('z', 1), 'r1', 5000); // a record sweeps expired entries
    assert.deepEqual(Object.fromEntries(idx.match(...chain('a', 3), 5000)), { r0: 300 });
    assert.deepEqual(Object.fromEntries(idx.match(...chain('b', 3), 5000)), {}, 'never matched: its TTL holds on the same replica');
    assert.equal(idx.retentionMs('r0'), 1000, 'the replica keeps its estimate for the links the events do not speak for');
    assert.deepEqual(Object.fromEntries(idx.exactByReplica()), { r0: 3 });
    idx.markExact('r0', ['a-0', 'a-1', 'a-2'], false);
    assert.deepEqual(Object.fromEntries(idx.match(...chain('a', 3), 5000)), {});
  });

  it('feedback on a replica with KV events: exact links stay, the links never matched are judged as before', () => {
    const idx = createPrefixIndex({ maxEntries: 1000, ttlMs: 600_000 });
    idx.record(...chain('sys', 2), 'r0', 1_000);
    idx.markExact('r0', ['sys-0', 'sys-1'], true);
    idx.record(...chain('a', 5), 'r0', 10_000);
    // Served only 100 tokens of a 500-token chain: a-1.. evicted; the exact sys links (used earlier) stay.
    assert.equal(idx.evicted('r0', ...chain('a', 6), 100, 40_000), 30_000);
    assert.equal(idx.retentionMs('r0'), 30_000, 'the feedback still lowers the estimate');
    assert.deepEqual(Object.fromEntries(idx.match(...chain('a', 6), 40_000)), {});
    assert.deepEqual(Object.fromEntries(idx.match(...chain('sys', 2), 40_000)), { r0: 200 }, 'exact: the events say when it goes');
  });

  it('removeReplica frees the replica\'s id for the next one; the sweep walks only present replicas', () => {
    const idx = createPrefixIndex({ maxEntries: 100, ttlMs: 1000 });
    for (let i = 0; i < 50; i++) {
      idx.record(...chain(`s${i}`, 1), `gone-${i}`, i * 2000);
      idx.removeReplica(`gone-${i}`);
    }
    idx.record(...chain('a', 1), 'here', 200_000);
    assert.deepEqual([...idx.tokensByReplica().keys()], ['here']);
    assert.equal(idx.size(), 1);
  });

  it('evicted: the chain past what was served goes, with all the replica used before it, and retention drops', () => {
    const idx = createPrefixIndex({ maxEntries: 1000, ttlMs: 600_000 });
    idx.record(...chain('old', 3), 'r0', 1_000);
    idx.record(...chain('a', 5), 'r0', 10_000);
    idx.record(...chain('new', 3), 'r0', 20_000);
    idx.record(...chain('a', 5), 'r1', 10_000);
    const age = idx.evicted('r0', ...chain('a', 6), 200, 40_000);
    assert.equal(age, 30_000);
    assert.equal(idx.retentionMs('r0'), 30_000);
    assert.equal(idx.retentionMs('r1'), 600_000);
    const m = Object.fromEntries(idx.match(...chain('a', 6), 40_000));
    assert.deepEqual(m, { r1: 500 }, 'r0 lost all of a past 200 tokens, and a itself was used no later than the lost link');
    assert.deepEqual(Object.fromEntries(idx.match(...chain('old', 3), 40_000)), {}, 'used before the lost link: surely lost');
    assert.deepEqual(Object.fromEntries(idx.match(...chain('new', 3), 40_000)), { r0: 300 }, 'used after it: kept');
    // Past the new retention, r0's entries are no longer believed.
    assert.deepEqual(Object.fromEntries(idx.match(...chain('new', 3), 51_000)), {});
    // A hit on an older prefix raises it back (never above the TTL).
    idx.record(...chain('b', 2), 'r0', 60_000);
    idx.kept('r0', ...chain('b', 2), 200, 60_000 + 25_000);
    assert.equal(idx.retentionMs('r0'), 30_000);
    idx.kept('r0', ...chain('b', 2), 200, 60_000 + 45_000);
    assert.equal(idx.retentionMs('r0'), 45_000);
  });

  it('evicted: nothing believed beyond what was served is no eviction', () => {
    const idx = createPrefixIndex(big);
    idx.record(...chain('a', 2), 'r0', 0);
    assert.equal(idx.evicted('r0', ...chain('a', 3), 200, 10), null);
    assert.equal(idx.retentionMs('r0'), 60_000);
  });
});
