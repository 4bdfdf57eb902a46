import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createAdapterLabels } from '../../src/record/adapter-labels.js';

describe('per-adapter metric labels', () => {
  it('gives the busiest N adapters their own label and the rest `other`, dealt again as traffic moves', () => {
    let t = 0;
    const dropped: string[] = [];
    const labels = createAdapterLabels({ topN: () => 2, dropped: (a) => dropped.push(a), now: () => t, halfLifeMs: 1_000, everyMs: 100 });
    assert.equal(labels.label('a'), 'a');
    assert.equal(labels.label('b'), 'b');
    assert.equal(labels.label('c'), 'other', 'no place left');
    // c becomes the busiest while a goes quiet: at the next deal a loses its place and its series.
    for (let i = 0; i < 50; i++) { t += 10; labels.label('c'); labels.label('b'); }
    t += 200;
    assert.equal(labels.label('c'), 'c');
    assert.equal(labels.label('a'), 'other');
    assert.deepEqual(dropped, ['a']);
  });

  it('with N = 0 every adapter is `other`', () => {
    const labels = createAdapterLabels({ topN: () => 0, dropped: () => undefined });
    assert.equal(labels.label('a'), 'other');
  });
});
