import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createDriftWatch } from '../../src/routing/drift.js';
import type { RequestIdentity } from '../../src/identify/identity.js';

/** Just what the watch reads of an identity: the chain (one link per message), its seed, where the first user message is. */
const turn = (links: string[], seed = 's'): RequestIdentity => ({ chain: links, seed, firstUser: 1 }) as unknown as RequestIdentity;
const chain = (tag: string, n: number) => Array.from({ length: n }, (_, i) => `${tag}-${i}`);

describe('prompt-drift watch', () => {
  it('is bounded by the links it keeps over all sessions, not only by their number: the least recently seen go first', () => {
    const watch = createDriftWatch(1_000, 100);
    for (let s = 0; s < 5; s++) watch.observe(`s${s}`, turn(chain(`s${s}`, 30)), 0);
    // 150 links were seen; 100 fit: s0 and s1 are forgotten, so an edit of theirs is a first turn again.
    for (const s of ['s0', 's1']) assert.equal(watch.observe(s, turn(['edited', ...chain(s, 30).slice(1)]), 1), null, s);
    const kept = watch.observe('s4', turn(['edited', ...chain('s4', 30).slice(1)]), 1);
    assert.deepEqual(kept && { where: kept.where, message: kept.message }, { where: 'system', message: 0 });
  });

  it('keeps the session just seen even when its chain alone is over the bound', () => {
    const watch = createDriftWatch(1_000, 10);
    watch.observe('long', turn(chain('long', 50)), 0);
    const d = watch.observe('long', turn([...chain('long', 49), 'changed', 'more']), 1);
    assert.equal(d?.where, 'history');
    assert.equal(d?.message, 49);
  });
});
