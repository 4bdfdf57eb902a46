import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DEFAULT_ROUTING_OPTIONS, resolveRoutingOptions } from '../../src/routing/options.js';

describe('routing options', () => {
  it('defaults: c = 1.25, 10-minute prefix TTL, 640K index entries', () => {
    const o = resolveRoutingOptions();
    assert.deepEqual(o, DEFAULT_ROUTING_OPTIONS);
    assert.equal(o.loadFactor, 1.25);
    assert.equal(o.prefixTtlMs, 600_000);
    assert.equal(o.prefixMaxEntries, 640_000);
  });

  it('nested objects merge field by field; undefined leaves the default', () => {
    const o = resolveRoutingOptions({ weights: { load: 0.5 }, prior: { prefillMsPerToken: 0.2 }, tieMs: undefined });
    assert.deepEqual(o.weights, { ...DEFAULT_ROUTING_OPTIONS.weights, load: 0.5 });
    assert.equal(o.prior.prefillMsPerToken, 0.2);
    assert.equal(o.prior.fixedMs, DEFAULT_ROUTING_OPTIONS.prior.fixedMs);
    assert.equal(o.tieMs, DEFAULT_ROUTING_OPTIONS.tieMs);
  });

  const invalid: [string, object, RegExp][] = [
    ['c must exceed 1', { loadFactor: 1 }, /loadFactor/],
    ['hard cap below c', { loadFactor: 1.5, hardCapFactor: 1.2 }, /hardCapFactor/],
    ['negative weight', { weights: { sessionPin: -1 } }, /sessionPin/],
    ['forgetting out of range', { costForgetting: 1.5 }, /costForgetting/],
    ['zero prefill prior', { prior: { prefillMsPerToken: 0 } }, /prefillMsPerToken/],
    ['NaN ttl', { prefixTtlMs: Number.NaN }, /prefixTtlMs/],
  ];
  for (const [name, input, re] of invalid) it(`rejects: ${name}`, () => assert.throws(() => resolveRoutingOptions(input), re));
});
