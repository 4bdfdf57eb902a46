// Few agents, long sessions: the agents' prompts fit every cache with room, and what will fill the
// caches is the sessions' own histories. First placements then keep session counts even and each
// agent's sessions together (placement.ts placeForGrowth), where a placement by key alone spread
// them unevenly with every agent on every replica.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { HOME_SLACK_SESSIONS, placeForGrowth } from '../../src/routing/placement.js';
import { createRouter } from '../../src/routing/router.js';
import { chatIdentity, fleet, prng, replica, store, words } from './helpers.js';

const AGENTS = 4;
const SESSIONS = 48;
const CAPACITY = 40_000;
const systems = Array.from({ length: AGENTS }, (_, a) => words(1_500, prng(100 + a)));

describe('first placements plan for the sessions\' growth while every agent fits', () => {
  it("48 sessions of 4 agents on 4 replicas: even counts, each agent's sessions together", () => {
    let clock = 7_000_000;
    const replicas = fleet(4, { kvCapacityTokens: CAPACITY });
    const router = createRouter('affinity', { store: store(), now: () => clock, random: prng(3) });
    // Sessions start in a shuffled order, as callers do: agent = session mod 4.
    const order = Array.from({ length: SESSIONS }, (_, i) => i);
    const rand = prng(9);
    for (let i = order.length - 1; i > 0; i--) {
      const j = Math.floor(rand() * (i + 1));
      [order[i], order[j]] = [order[j], order[i]];
    }
    const placed = new Map<string, number[]>();
    const reasons = new Set<string>();
    for (const s of order) {
      const identity = chatIdentity([{ role: 'system', content: systems[s % AGENTS] }, { role: 'user', content: `caller ${s} says hello` }], `call-${s}`);
      assert.ok(identity.sharedTokens * AGENTS < 0.5 * CAPACITY, 'the agents fit every cache with room');
      const d = router.route({ identity, replicas });
      const name = d.ranked[0].name;
      reasons.add(d.reason);
      router.served(identity, { replica: name, result: 'ok', replicaTtftMs: 50, promptTokens: identity.promptTokens, cachedTokens: 0 });
      placed.set(name, [...(placed.get(name) ?? []), s % AGENTS]);
      clock += 20;
    }
    assert.deepEqual([...reasons], ['placed']);
    const counts = replicas.map((r) => placed.get(r.name)?.length ?? 0);
    assert.ok(Math.max(...counts) - Math.min(...counts) <= HOME_SLACK_SESSIONS, `sessions per replica ${counts}`);
    const agentsPer = replicas.map((r) => new Set(placed.get(r.name)).size);
    // An agent whose first sessions come in a row takes a second replica early (the slack is two
    // sessions); the rest stays together. Placed by key alone, every replica held 3-4 agents.
    const pairs = agentsPer.reduce((a, b) => a + b, 0);
    assert.ok(pairs <= AGENTS + 3 && Math.max(...agentsPer) <= 2, `agents per replica ${agentsPer} (${replicas.map((r) => placed.get(r.name)?.join('')).join(' | ')})`);
  });

  it('an agent\'s replica takes its session within the slack; past it, the emptiest replica does', () => {
    const candidates = ['r0', 'r1', 'r2'].map((n) => replica(n));
    const set = (sessions: number, agents: string[]) => ({ tokens: 0, sessions, agents: new Map(agents.map((a) => [a, 1_000])) });
    const all = [true, true, true];
    const at = (homeSessions: number) => placeForGrowth({ candidates, sets: [set(homeSessions, ['a']), set(2, ['b']), set(3, ['c', 'd'])], agent: 'a', loadOk: all, homeLoadOk: all }).index;
    assert.equal(at(2 + HOME_SLACK_SESSIONS), 0, 'within the slack: with its agent');
    assert.equal(at(3 + HOME_SLACK_SESSIONS), 1, 'past it: the emptiest');
    // Weights: a replica of weight 2 holding 4 sessions is as full as one of weight 1 holding 2.
    const heavy = [replica('r0', { weight: 2 }), replica('r1')];
    const p = placeForGrowth({ candidates: heavy, sets: [set(4, ['x']), set(3, ['y'])], agent: 'z', loadOk: [true, true], homeLoadOk: [true, true] });
    assert.equal(p.index, 0);
    // Over the hard cap the agent's replica is passed over; nothing under the soft cap: −1.
    assert.equal(placeForGrowth({ candidates, sets: [set(0, ['a']), set(2, ['b']), set(3, [])], agent: 'a', loadOk: [false, true, true], homeLoadOk: [false, true, true] }).index, 1);
    assert.equal(placeForGrowth({ candidates, sets: [set(0, []), set(0, []), set(0, [])], agent: 'a', loadOk: [false, false, false], homeLoadOk: [false, false, false] }).index, -1);
  });
});
