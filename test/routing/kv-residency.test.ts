import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createKvResidency, type KvEvent } from '../../src/routing/kv-residency.js';

// Blocks of 4 tokens; a chain of hashes `${tag}1`, `${tag}2`, ... under `parent`.
const stored = (tag: string, from: number, to: number, parent: string | null = from > 1 ? `${tag}${from - 1}` : null): KvEvent => ({
  type: 'stored', hashes: Array.from({ length: to - from + 1 }, (_, i) => `${tag}${from + i}`), parent, tokenCount: (to - from + 1) * 4, blockSize: 4, medium: 'GPU',
});

function residency(maxBlocks = 1000) {
  const lost: string[] = [];
  let cleared = 0;
  const r = createKvResidency({ maxBlocks, hooks: { lost: (_r, links) => void lost.push(...links), cleared: () => void cleared++ } });
  r.setLive('a', 0, true);
  return { r, lost, cleared: () => cleared };
}

describe('KV residency: learning which engine blocks a request ended in', () => {
  it('the block at the prompt\'s depth, stored since it was sent; links spread over its ancestors', () => {
    const { r, lost } = residency();
    r.apply('a', [stored('x', 1, 10)], 5);
    // Links: system (20 estimated tokens of 40), user (40 of 40); 40 real tokens = depth 10.
    assert.equal(r.learn('a', ['sys', 'user'], [20, 40], 40, 5).reason, 'learned');
    assert.deepEqual(r.stats('a'), { blocks: 10, links: 2 });
    r.apply('a', [{ type: 'removed', hashes: ['x10'], medium: 'GPU' }], 6);
    assert.deepEqual(lost, ['user']);
    r.apply('a', [{ type: 'removed', hashes: ['x9', 'x8', 'x7', 'x6', 'x5'], medium: 'GPU' }], 6);
    assert.deepEqual(lost, ['user', 'sys'], 'the system link ended in block 5');
  });

  it('blocks stored before the request was sent are not its own', () => {
    const { r } = residency();
    r.apply('a', [stored('x', 1, 10)], 1);
    assert.equal(r.learn('a', ['l'], [40], 40, 5).reason, 'none');
  });

  it('two at that depth: the conversation\'s earlier link picks its lineage, else ambiguous', () => {
    const { r } = residency();
    r.apply('a', [stored('x', 1, 5)], 1);
    assert.equal(r.learn('a', ['sys'], [20], 20, 1).reason, 'learned');
    r.apply('a', [stored('x', 6, 10), stored('y', 1, 10)], 2);
    assert.equal(r.learn('a', ['other'], [40], 40, 2).reason, 'ambiguous', 'no mapped link: cannot tell x from y');
    assert.equal(r.learn('a', ['sys', 'user'], [20, 40], 40, 2).reason, 'learned', 'sys is on x');
  });

  it('a prompt served wholly from cache (nothing stored since): the block of its own lineage at that depth', () => {
    const { r, lost } = residency();
    r.apply('a', [stored('x', 1, 10)], 1);
    assert.equal(r.learn('a', ['sys', 'u1'], [20, 40], 40, 1).reason, 'learned');
    // The next turn adds under a block: same depth, nothing new stored.
    assert.equal(r.learn('a', ['sys', 'u1', 'a1', 'u2'], [20, 40, 41, 42], 42, 5).reason, 'learned');
    r.apply('a', [{ type: 'removed', hashes: ['x10'], medium: 'GPU' }], 6);
    assert.deepEqual(lost.sort(), ['a1', 'u1', 'u2']);
  });

  it('a request shorter than a block, or a replica never heard from, learns nothing', () => {
    const { r } = residency();
    assert.equal(r.learn('a', ['l'], [40], 40, 0).reason, 'unknown_replica');
    r.apply('a', [stored('x', 1, 1)], 1);
    assert.equal(r.learn('a', ['l'], [3], 3, 0).reason, 'short');
  });

  it('AllBlocksCleared empties the replica and tells the index; reset starts it empty', () => {
    const { r, cleared } = residency();
    r.apply('a', [stored('x', 1, 4)], 1);
    r.apply('a', [{ type: 'cleared' }], 2);
    assert.equal(cleared(), 1);
    assert.deepEqual(r.stats('a'), { blocks: 0, links: 0 });
    r.apply('a', [stored('x', 1, 4)], 3);
    r.reset('a');
    assert.deepEqual(r.stats('a'), { blocks: 0, links: 0 });
  });

  it('memory: one budget over every replica, the least recently stored out first; its links become estimates again', () => {
    const unmatched: string[] = [];
    const r = createKvResidency({ maxBlocks: 8, hooks: { lost: () => undefined, cleared: () => undefined, unmatched: (_r, links) => void unmatched.push(...links) } });
    r.setLive('a', 0, true);
    r.apply('a', [stored('x', 1, 4)], 1);
    assert.equal(r.learn('a', ['l'], [16], 16, 1).reason, 'learned');
    r.apply('b', [stored('y', 1, 4)], 2);
    assert.equal(r.size(), 8);
    r.apply('a', [stored('x', 1, 1)], 3); // stored again: the most recent now
    r.apply('b', [stored('z', 1, 3)], 4);
    assert.equal(r.size(), 8);
    assert.deepEqual(r.stats('a'), { blocks: 1, links: 0 }, 'x2..x4 were the least recently stored, x1 refreshed');
    assert.deepEqual(r.stats('b'), { blocks: 7, links: 0 });
    assert.deepEqual(unmatched, ['l'], 'a budget drop is no eviction: the link is an estimate again');
  });

  it('memory: a block a served prompt ended on counts as used; the budget takes older ones first', () => {
    const unmatched: string[] = [];
    const r = createKvResidency({ maxBlocks: 8, hooks: { lost: () => undefined, cleared: () => undefined, unmatched: (_r, links) => void unmatched.push(...links) } });
    r.setLive('a', 0, true);
    r.apply('a', [stored('x', 1, 4)], 1);
    r.apply('b', [stored('y', 1, 4)], 2);
    assert.equal(r.learn('a', ['l'], [16], 16, 1).reason, 'learned'); // x4, after y was stored
    r.apply('b', [stored('z', 1, 3)], 4);
    assert.deepEqual(r.stats('a'), { blocks: 1, links: 1 }, 'x1..x3 went, x4 (used) stayed');
    assert.deepEqual(unmatched, []);
  });

  it('data-parallel ranks: the same hash on two ranks is two blocks; a rank reset leaves the other', () => {
    const { r } = residency();
    r.apply('a', [stored('x', 1, 4)], 1, 0);
    r.apply('a', [stored('x', 1, 4)], 1, 1);
    assert.equal(r.stats('a')?.blocks, 8);
    r.apply('a', [{ type: 'removed', hashes: ['x4'], medium: 'GPU' }], 2, 1);
    assert.equal(r.stats('a')?.blocks, 7);
    r.reset('a', 1);
    assert.equal(r.stats('a')?.blocks, 4);
    r.remove('a');
    assert.equal(r.size(), 0);
  });

  it('memory: at most maxBlocks, the oldest stored first out', () => {
    const { r } = residency(8);
    r.apply('a', [stored('x', 1, 20)], 1);
    assert.equal(r.stats('a')?.blocks, 8);
    // A block whose parent was dropped has no known depth: it cannot be mistaken for another's.
    r.apply('a', [stored('z', 2, 2, 'unknown-parent')], 2);
    assert.equal(r.learn('a', ['l'], [4], 4, 2).reason, 'none');
  });
});

describe('KV residency: a lineage made inconsistent by a removal and a new store', () => {
  it('a block stored again under its own child does not send learning round in a loop', () => {
    const { r } = residency();
    // b1 ← b2; b1 removed, then stored again with b2 as its parent: b2's parent b1 now sits below it.
    r.apply('a', [{ type: 'stored', hashes: ['b1', 'b2'], parent: null, tokenCount: 8, blockSize: 4, medium: 'GPU' }], 1);
    r.apply('a', [{ type: 'removed', hashes: ['b1'], medium: 'GPU' }], 2);
    r.apply('a', [{ type: 'stored', hashes: ['b1'], parent: 'b2', tokenCount: 4, blockSize: 4, medium: 'GPU' }], 3);
    // 12 tokens: depth 3 is b1; the first link's depth (1) is reached only through b2 → b1 → b2 …
    const out = r.learn('a', ['l0', 'l1'], [4, 12], 12, 0);
    assert.equal(out.reason, 'learned');
    assert.deepEqual(r.stats('a'), { blocks: 2, links: 1 }, 'only the link whose block is consistent is mapped');
  });
});
