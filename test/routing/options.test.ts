import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { defaultsOf } from '../../src/config/defaults.js';
import { RoutingOptionsSchema } from '../../src/config/schema.js';
import { resolveRoutingOptions } from '../../src/routing/options.js';

describe('routing options', () => {
  it('defaults come from the config schema: c = 1.25, 10-minute prefix TTL, 640K index entries', () => {
    const o = resolveRoutingOptions();
    assert.deepEqual(o, defaultsOf(RoutingOptionsSchema));
    assert.equal(o.loadFactor, 1.25);
    assert.equal(o.hardCapMin, 16);
    assert.equal(o.prefixTtlMs, 600_000);
    assert.equal(o.prefixMaxEntries, 640_000);
  });

  it('nested objects merge field by field; undefined leaves the default', () => {
    const d = resolveRoutingOptions();
    const o = resolveRoutingOptions({ weights: { load: 0.5 }, prior: { prefillMsPerToken: 0.2 }, tieMs: undefined });
    assert.deepEqual(o.weights, { ...d.weights, load: 0.5 });
    assert.equal(o.prior.prefillMsPerToken, 0.2);
    assert.equal(o.prior.fixedMs, d.prior.fixedMs);
    assert.equal(o.tieMs, d.tieMs);
  });

  const invalid: [string, object, RegExp][] = [
    ['c must exceed 1', { loadFactor: 1 }, /loadFactor/],
    ['hard cap below c', { loadFactor: 1.5, hardCapFactor: 1.2 }, /hardCapFactor/],
    ['negative weight', { weights: { sessionPin: -1 } }, /sessionPin/],
    ['forgetting out of range', { costForgetting: 1.5 }, /costForgetting/],
    ['zero prefill prior', { prior: { prefillMsPerToken: 0 } }, /prefillMsPerToken/],
    ['NaN ttl', { prefixTtlMs: Number.NaN }, /prefixTtlMs/],
    ['unknown option', { loadFactr: 1.5 }, /loadFactr/],
  ];
  for (const [name, input, re] of invalid) it(`rejects: ${name}`, () => assert.throws(() => resolveRoutingOptions(input), re));

  it('reports every problem at once', () => {
    assert.throws(() => resolveRoutingOptions({ loadFactor: 0.5, costForgetting: 2, weights: { load: -1 } } as object), (e: Error) =>
      /loadFactor/.test(e.message) && /costForgetting/.test(e.message) && /load/.test(e.message));
  });
});
