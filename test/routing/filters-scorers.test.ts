import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isWarmrouteError } from '../../src/errors.js';
import { healthyFilter } from '../../src/routing/filters/healthy.js';
import { modelFilter } from '../../src/routing/filters/model.js';
import { filterCandidates } from '../../src/routing/pipeline.js';
import { loadScorer } from '../../src/routing/scorers/load.js';
import { createPrefixMatchScorer } from '../../src/routing/scorers/prefix-match.js';
import { createSessionPinScorer } from '../../src/routing/scorers/session-pin.js';
import type { ReplicaView, RouteRequest } from '../../src/routing/types.js';
import { keyIdentity, replica } from './helpers.js';

const req = (replicas: ReplicaView[], model: string | null = 'm', promptTokens = 0): RouteRequest => ({
  identity: { ...keyIdentity(null), model, promptTokens },
  replicas,
});
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

  it('an unknown model is a 404 model_not_found in OpenAI shape', () => {
    assert.throws(() => filterCandidates(req([replica('a', { models: new Set(['x']) })], 'gpt-9'), [healthyFilter, modelFilter]), (e: unknown) => {
      assert.ok(isWarmrouteError(e));
      assert.equal(e.statusCode, 404);
      assert.equal(e.openaiCode, 'model_not_found');
      assert.match(e.message, /gpt-9/);
      return true;
    });
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
    const s = createSessionPinScorer(() => 'b').score(req(rs), rs);
    assert.deepEqual(Object.fromEntries(s), { a: 0, b: 1, c: 0 });
    assert.deepEqual(Object.fromEntries(createSessionPinScorer(() => null).score(req(rs), rs)), { a: 0, b: 0, c: 0 });
  });

  const prefixTable: [string, number, Record<string, number>, Record<string, number>][] = [
    ['matched / total prompt', 1000, { a: 1000, b: 250 }, { a: 1, b: 0.25, c: 0 }],
    ['capped at 1', 100, { a: 150 }, { a: 1, b: 0, c: 0 }],
    ['no prompt: 0', 0, { a: 10 }, { a: 0, b: 0, c: 0 }],
  ];
  for (const [name, total, matched, want] of prefixTable) {
    it(`prefix match: ${name}`, () => {
      const s = createPrefixMatchScorer(() => new Map(Object.entries(matched))).score(req(rs, 'm', total), rs);
      assert.deepEqual(Object.fromEntries(s), want);
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
      const got = Object.fromEntries(loadScorer.score(req(replicas), replicas));
      for (const k of Object.keys(want)) assert.ok(Math.abs(got[k] - want[k]) < 1e-9, `${k}: ${got[k]} vs ${want[k]}`);
    });
  }
});
