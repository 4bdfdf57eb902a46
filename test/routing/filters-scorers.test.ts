import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isWarmrouteError } from '../../src/errors.js';
import { healthyFilter } from '../../src/routing/filters/healthy.js';
import { modelFilter } from '../../src/routing/filters/model.js';
import { notFailedFilter } from '../../src/routing/filters/not-failed.js';
import { filterCandidates } from '../../src/routing/pipeline.js';
import { loadScorer } from '../../src/routing/scorers/load.js';
import { prefixMatchScorer } from '../../src/routing/scorers/prefix-match.js';
import { sessionPinScorer } from '../../src/routing/scorers/session-pin.js';
import type { ReplicaView, RouteContext } from '../../src/routing/types.js';
import { keyIdentity, replica } from './helpers.js';

const req = (replicas: ReplicaView[], model: string | null = 'm', promptTokens = 0, over: Partial<RouteContext> = {}): RouteContext => ({
  identity: { ...keyIdentity(null), model, promptTokens },
  replicas, now: 0, pin: null, warm: new Map(), avoid: null, ...over,
});
const byName = (rs: readonly ReplicaView[], scores: readonly number[]) => Object.fromEntries(rs.map((r, i) => [r.name, scores[i]]));
const names = (rs: readonly ReplicaView[]) => rs.map((r) => r.name);

describe('filters', () => {
  const table: [string, ReplicaView[], string | null, string[]][] = [
    ['healthy keeps up replicas', [replica('a'), replica('b', { up: false })], 'm', ['a']],
    ['healthy drops draining replicas', [replica('a', { draining: true }), replica('b')], 'm', ['b']],
    ['model keeps replicas serving it', [replica('a', { models: new Set(['m']) }), replica('b', { models: new Set(['x']) })], 'm', ['a']],
    ['model keeps replicas whose models are not yet known', [replica('a', { models: null })], 'm', ['a']],
    ['no model in the request: all kept', [replica('a', { models: new Set(['x']) })], null, ['a']],
  ];
  for (const [name, replicas, model, want] of table) {
    it(name, () => assert.deepEqual(names(filterCandidates(req(replicas, model), [healthyFilter, modelFilter])), want));
  }

  it('a list every replica passes is handed on as it is, not copied', () => {
    const rs = [replica('a', { models: new Set(['m']) }), replica('b', { models: null })];
    assert.equal(filterCandidates(req(rs, 'm'), [healthyFilter, modelFilter]), rs);
  });

  it('an unknown model is a 404 model_not_found in OpenAI shape', () => {
    assert.throws(() => filterCandidates(req([replica('a', { models: new Set(['x']) })], 'gpt-9'), [healthyFilter, modelFilter]), (e: unknown) => {
      assert.ok(isWarmrouteError(e));
      assert.equal(e.statusCode, 404);
      assert.equal(e.openaiCode, 'model_not_found');
      assert.match(e.message, /gpt-9/);
      return true;
    });
  });

  it('not-failed drops the replica the session last broke off on, unless it is the only one', () => {
    const rs = [replica('a'), replica('b')];
    assert.deepEqual(names(filterCandidates(req(rs, 'm', 0, { avoid: 'a' }), [healthyFilter, notFailedFilter])), ['b']);
    assert.deepEqual(names(filterCandidates(req([replica('a')], 'm', 0, { avoid: 'a' }), [notFailedFilter])), ['a']);
    assert.deepEqual(names(filterCandidates(req(rs), [notFailedFilter])), ['a', 'b']);
  });

  it('no healthy replica is a 503 no_healthy_replica', () => {
    assert.throws(() => filterCandidates(req([replica('a', { up: false })]), [healthyFilter, modelFilter]), (e: unknown) => {
      assert.ok(isWarmrouteError(e));
      assert.equal(e.statusCode, 503);
      assert.equal(e.openaiCode, 'no_healthy_replica');
      return true;
    });
  });
});

describe('scorers', () => {
  const rs = [replica('a'), replica('b'), replica('c')];

  it('session pin: 1 for the pinned replica only', () => {
    const pin = { key: 'k', replica: 'b', since: 0, lastSeen: 0, warmTokens: 0 };
    assert.deepEqual(byName(rs, sessionPinScorer.score(req(rs, 'm', 0, { pin }), rs)), { a: 0, b: 1, c: 0 });
    assert.deepEqual(byName(rs, sessionPinScorer.score(req(rs), rs)), { a: 0, b: 0, c: 0 });
  });

  const prefixTable: [string, number, Record<string, number>, Record<string, number>][] = [
    ['matched / total prompt', 1000, { a: 1000, b: 250 }, { a: 1, b: 0.25, c: 0 }],
    ['capped at 1', 100, { a: 150 }, { a: 1, b: 0, c: 0 }],
    ['no prompt: 0', 0, { a: 10 }, { a: 0, b: 0, c: 0 }],
  ];
  for (const [name, total, matched, want] of prefixTable) {
    it(`prefix match: ${name}`, () => {
      const s = prefixMatchScorer.score(req(rs, 'm', total, { warm: new Map(Object.entries(matched)) }), rs);
      assert.deepEqual(byName(rs, s), want);
    });
  }

  const loadTable: [string, ReplicaView[], Record<string, number>][] = [
    ['idle fleet: all 1', [replica('a'), replica('b')], { a: 1, b: 1 }],
    ['in flight at this gateway, relative to the deepest', [replica('a', { inflight: 4 }), replica('b', { inflight: 1 }), replica('c')], { a: 0, b: 0.75, c: 1 }],
    ['vLLM running + waiting count when larger than our own', [replica('a', { running: 3, waiting: 1 }), replica('b', { inflight: 2 })], { a: 0, b: 0.5 }],
    ['weighted: 4 on weight 2 is like 2 on weight 1', [replica('a', { inflight: 4, weight: 2 }), replica('b', { inflight: 2 })], { a: 0, b: 0 }],
    ['KV usage scales it down', [replica('a', { kvUsage: 0.9 }), replica('b', { kvUsage: 0 })], { a: 0.1, b: 1 }],
  ];
  for (const [name, replicas, want] of loadTable) {
    it(`load: ${name}`, () => {
      const got = byName(replicas, loadScorer.score(req(replicas), replicas));
      for (const k of Object.keys(want)) assert.ok(Math.abs(got[k] - want[k]) < 1e-9, `${k}: ${got[k]} vs ${want[k]}`);
    });
  }
});
