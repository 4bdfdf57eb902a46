import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createCostModel } from '../../src/routing/cost-model.js';
import { resolveRoutingOptions } from '../../src/routing/options.js';
import { prng } from './helpers.js';

const defaults = resolveRoutingOptions();
const prior = defaults.prior;
const fresh = () => createCostModel(prior, defaults.costForgetting);

describe('cost model: prior (seed figures)', () => {
  // Seed figures from a stock vLLM on one H100: warm floor 28 ms, fresh 1K 130 ms, cold 5.5K 864 ms.
  const cases: [string, number, number, number, number][] = [
    ['warm floor, ~30 tokens', 30, 0, 0, 28],
    ['fresh 1K prompt', 1000, 0, 0, 130],
    ['cold 5.5K prefill', 5500, 0, 0, 864],
  ];
  for (const [name, uncached, waiting, running, observed] of cases) {
    it(`${name}: the prior is within 30% of ${observed} ms`, () => {
      const est = fresh().estimate('r0', uncached, waiting, running);
      assert.ok(Math.abs(est - observed) / observed < 0.3, `estimate ${est.toFixed(0)} ms`);
    });
  }
  it('a waiting request costs more than a running one, and both cost', () => {
    const m = fresh();
    const idle = m.estimate('r0', 100, 0, 0);
    assert.ok(m.estimate('r0', 100, 1, 0) > m.estimate('r0', 100, 0, 1));
    assert.ok(m.estimate('r0', 100, 0, 1) > idle);
  });
});

describe('cost model: learning', () => {
  function train(truth: { a: number; b: number; q: number; r: number }, n: number, seed = 1, noise = 10) {
    const m = fresh();
    const rand = prng(seed);
    for (let i = 0; i < n; i++) {
      const u = Math.floor(rand() * 6000);
      const w = rand() < 0.5 ? 0 : Math.floor(rand() * 6);
      const run = Math.floor(rand() * 30);
      const y = truth.a + truth.b * u + truth.q * w + truth.r * run + (rand() - 0.5) * 2 * noise;
      m.observe('r0', u, true, w, run, y);
    }
    return m;
  }

  it('recovers a slower replica (prefill 0.25 ms/token, queue 120 ms) from 300 observations', () => {
    const p = train({ a: 40, b: 0.25, q: 120, r: 2 }, 300).params('r0');
    assert.ok(Math.abs(p.prefillMsPerToken - 0.25) < 0.02, `prefill ${p.prefillMsPerToken}`);
    assert.ok(Math.abs(p.queueMsPerWaiting - 120) < 15, `queue ${p.queueMsPerWaiting}`);
    assert.ok(Math.abs(p.fixedMs - 40) < 20, `fixed ${p.fixedMs}`);
    assert.equal(p.samples, 300);
  });

  it('tracks a change: after the replica gets 2× faster, recent observations win', () => {
    const m = train({ a: 30, b: 0.2, q: 50, r: 1 }, 300);
    const rand = prng(9);
    for (let i = 0; i < 300; i++) {
      const u = Math.floor(rand() * 6000);
      m.observe('r0', u, true, 0, 0, 30 + 0.1 * u);
    }
    assert.ok(Math.abs(m.params('r0').prefillMsPerToken - 0.1) < 0.015, `${m.params('r0').prefillMsPerToken}`);
  });

  it('one pathological TTFT (a preempted request) barely moves the fit', () => {
    const m = train({ a: 30, b: 0.13, q: 50, r: 1 }, 200);
    const before = m.estimate('r0', 2000, 0, 0);
    m.observe('r0', 200, true, 0, 0, 30_000);
    const after = m.estimate('r0', 2000, 0, 0);
    assert.ok(Math.abs(after - before) < 0.35 * before, `${before.toFixed(0)} → ${after.toFixed(0)} ms`);
  });

  it('a constant feature (no queue for a long time) does not wind up and explode later', () => {
    const m = fresh();
    for (let i = 0; i < 5000; i++) m.observe('r0', 1000, true, 0, 0, 160);
    m.observe('r0', 1000, true, 3, 0, 400);
    const q = m.params('r0').queueMsPerWaiting;
    assert.ok(q > 0 && q < 200, `queue ${q}`);
  });

  it('replicas are fitted independently', () => {
    const m = fresh();
    for (let i = 0; i < 200; i++) m.observe('slow', (i % 50) * 100, true, 0, 0, 30 + 0.4 * (i % 50) * 100);
    assert.ok(m.params('slow').prefillMsPerToken > 0.3);
    assert.equal(m.params('other').prefillMsPerToken, prior.prefillMsPerToken);
    assert.equal(m.params('other').samples, 0);
  });

  it('learns the ratio of real to estimated tokens and applies it to estimates', () => {
    const m = fresh();
    const before = m.estimate('r0', 1000, 0, 0);
    for (let i = 0; i < 200; i++) m.observeTokens(1000, 1500);
    assert.ok(Math.abs(m.tokenScale() - 1.5) < 0.01);
    assert.ok(m.estimate('r0', 1000, 0, 0) - prior.fixedMs > 1.45 * (before - prior.fixedMs));
  });

  it('knows the token scale from the first reports, not after dozens (placement under pressure reads it at once)', () => {
    const m = fresh();
    m.observeTokens(600, 1900);
    assert.ok(Math.abs(m.tokenScale() - 1900 / 600) < 0.01, `one report: ${m.tokenScale()}`);
    for (let i = 0; i < 5; i++) m.observeTokens(1000, 3000);
    assert.ok(m.tokenScale() > 3 && m.tokenScale() < 3.17, `six reports: ${m.tokenScale()}`);
    // Past the first reports, one outlier moves it by the EWMA's weight only.
    for (let i = 0; i < 50; i++) m.observeTokens(1000, 3000);
    m.observeTokens(1000, 1000);
    assert.ok(m.tokenScale() > 2.85, `after an outlier: ${m.tokenScale()}`);
  });
});
