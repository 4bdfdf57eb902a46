import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startFleet, type SimFleet } from '../../bench/sim/index.js';
import { accessLines, simTurn, startGateway, type TestGateway } from '../helpers/gateway.js';
import { counterSum, waitFor } from '../store/redis-server.js';
import type { PlacementInput } from '../../src/routing/placement.js';

// Replicas of 200 KV blocks: 3,200 tokens each, of which the working sets may plan 90%. Agents'
// prompts of 500 + 100·i tokens (≈ 4 characters a token): no replica can hold them all, so
// placement is capacity-aware from the fifth agent on.
const KV_BLOCKS = 200;
// What the gateway reads: num_gpu_blocks less vLLM's null block.
const CAPACITY = (KV_BLOCKS - 1) * 16;
const promptTokensOf = (i: number) => 500 + 100 * i;
const agent = (i: number) => {
  const head = `Agent ${i} of the clinic line. `;
  return head + 'Keep answers short and kind. '.repeat(Math.ceil((promptTokensOf(i) * 4 - head.length) / 29)).slice(0, promptTokensOf(i) * 4 - head.length);
};

async function turn(g: TestGateway, a: number, session: string, user = `hello from ${session}`) {
  const t = await simTurn(g, [{ role: 'system', content: agent(a) }, { role: 'user', content: user }], { session });
  assert.equal(t.status, 200, `${session}: HTTP ${t.status}`);
  return t;
}

// The load bound is not what these tests are about: at a dozen sessions one replica's share is a
// matter of a session or two, and c = 1.25 would spread agents for load.
const ROUTING = { strategy: 'affinity', options: { loadFactor: 2, hardCapFactor: 4 } };

/** Four replicas of KV_BLOCKS blocks and a gateway over them; by default no probes or warmup in the way. */
async function startPressured(
  gateway: Record<string, unknown> = { health: { probeIntervalMs: 600_000 }, warmup: { enabled: false } },
): Promise<{ fleet: SimFleet; g: TestGateway }> {
  const fleet = await startFleet({ replicas: 4, kvBlocks: KV_BLOCKS, outputTokens: { min: 2, max: 2 } });
  const g = await startGateway(fleet.urls, { routing: ROUTING, ...gateway });
  return { fleet, g };
}

describe('capacity-aware placement under KV pressure (simulated replicas, real sockets)', () => {
  let fleet: SimFleet;
  let g: TestGateway;
  before(async () => ({ fleet, g } = await startPressured()));
  after(async () => {
    await g.close();
    await fleet.close();
  });

  it("keeps an agent's sessions together, and every replica's agents within its KV capacity", async () => {
    const agents = 6;
    const where = new Map<number, Set<string>>();
    // Each agent's first session, then two more of each.
    for (let round = 0; round < 3; round++) {
      for (let a = 0; a < agents; a++) {
        const t = await turn(g, a, `together-${a}-${round}`);
        where.set(a, (where.get(a) ?? new Set()).add(t.replica));
      }
    }
    for (const [a, replicas] of where) assert.equal(replicas.size, 1, `agent ${a}'s sessions went to ${[...replicas].join(', ')}`);
    const byReplica = new Map<string, number[]>();
    for (const [a, replicas] of where) {
      const r = [...replicas][0];
      byReplica.set(r, [...(byReplica.get(r) ?? []), a]);
    }
    assert.ok(byReplica.size >= 3, `the agents spread over replicas: ${JSON.stringify([...byReplica])}`);
    for (const [r, as] of byReplica) {
      const tokens = as.reduce((n, a) => n + promptTokensOf(a), 0);
      assert.ok(tokens <= 0.9 * CAPACITY, `${r} serves agents ${as} (${tokens} prompt tokens) past 90% of its ${CAPACITY}`);
    }
    // The proof that they fit: the third session of every agent found its agent's prompt cached.
    const last = fleet.replicas.flatMap((s) => s.requests().slice(-2));
    for (const req of last) assert.ok(req.cachedTokens >= req.promptTokens - 64, `a late session was cold: ${req.cachedTokens} of ${req.promptTokens} cached`);
    // Capacity came from vllm:cache_config_info.
    assert.equal(g.gw.registry.replicas[0].kvCapacityTokens, CAPACITY);
  });
});

describe('a new session spills with reason capacity when its agent\'s replica is full', () => {
  let fleet: SimFleet;
  let g: TestGateway;
  before(async () => ({ fleet, g } = await startPressured()));
  after(async () => {
    await g.close();
    await fleet.close();
  });

  it('the agent spreads to another replica, the decision says capacity (header, access line, metric)', async () => {
    // Four other agents first: together they pass one replica's capacity (pressure).
    for (let a = 1; a <= 4; a++) await turn(g, a, `other-${a}`);
    // Agent 0's calls each carry ~1,000 tokens of their own: two of them fill its replica.
    const long = (k: number) => `caller ${k} says: ${'the booking number is seven two nine '.repeat(110)}`;
    const homes: string[] = [];
    const routes: string[] = [];
    for (let k = 0; k < 4; k++) {
      const t = await turn(g, 0, `long-${k}`, long(k));
      homes.push(t.replica);
      routes.push(t.route);
    }
    const spilled = routes.indexOf('capacity');
    assert.ok(spilled > 0, `no capacity spill: ${routes.join(', ')} on ${homes.join(', ')}`);
    assert.notEqual(homes[spilled], homes[0], 'the spilled session went elsewhere');
    assert.equal(routes[0], 'placed');
    await waitFor('the access line', () => accessLines(g.logs).some((l) => l.route === 'capacity'), 2_000);
    assert.ok(await counterSum(g.gw.metrics.decisions, ['reason', 'capacity']) >= 1);
    // The spilled session stays where it went: its next turn is pinned there.
    const again = await turn(g, 0, `long-${spilled}`, long(spilled));
    assert.equal(again.replica, homes[spilled]);
    assert.equal(again.route, 'pinned');
  });
});

describe('warmup that fits: a replica that restarts under pressure gets its home set, not the fleet\'s hottest', () => {
  let fleet: SimFleet;
  let g: TestGateway;
  before(async () => ({ fleet, g } = await startPressured({ health: { probeIntervalMs: 600_000, statsIntervalMs: 0 }, warmup: { topK: 8, concurrency: 1 } })));
  after(async () => {
    await g.close();
    await fleet.close();
  });

  it('sends the prompts of the agents placed there, and logs set home', async () => {
    const agents = 6;
    const where = new Map<number, string>();
    // Two sessions per agent: a shared prefix becomes a warmup candidate on its second sighting.
    for (let round = 0; round < 2; round++) for (let a = 0; a < agents; a++) where.set(a, (await turn(g, a, `warm-${a}-${round}`)).replica);
    assert.equal(g.gw.fleet.hot.size(), agents);
    // The replica serving the most agents restarts.
    const count = new Map<string, number>();
    for (const r of where.values()) count.set(r, (count.get(r) ?? 0) + 1);
    const name = [...count].sort((x, y) => y[1] - x[1])[0][0];
    const home = [...where].filter(([, r]) => r === name).map(([a]) => a).sort();
    assert.ok(home.length < agents);
    const sim = fleet.replicas.find((s) => `127.0.0.1:${s.port}` === name)!;
    const earlier = sim.requests().length;
    sim.fault({ kind: 'restart' });
    await g.gw.health.scrapeAll();
    await waitFor('warmup done', () => g.logs.some((l) => typeof l.msg === 'string' && l.msg.startsWith('warmup done')), 10_000);
    const line = g.logs.find((l) => typeof l.msg === 'string' && l.msg.startsWith('warmup done'))!;
    assert.equal(line.set, 'home');
    const sent = sim.requests().slice(earlier);
    assert.ok(sent.every((r) => r.completionTokens === 1));
    // Each warmup request is one agent's prompt: 500 + 100·i tokens plus the template's few.
    const warmed = sent.map((r) => Math.round((r.promptTokens - 500) / 100)).sort();
    assert.deepEqual(warmed, home, `warmed agents ${warmed} (prompt tokens ${sent.map((r) => r.promptTokens)}), home set ${home}`);
  });
});

describe('working sets and the placement rule, on their own', () => {
  const view = (name: string) => ({ name, weight: 1, up: true, draining: false, inflight: 0, models: null, waiting: 0, running: 0, kvUsage: 0, kvCapacityTokens: 1000 });

  it('a working set counts a shared prompt once, each session\'s own tokens, and forgets idle sessions', async () => {
    const { createWorkingSet } = await import('../../src/routing/working-set.js');
    const ws = createWorkingSet({ windowMs: 1_000, maxSessions: 100 });
    const a = { key: 'agent-a', tokens: 500 };
    ws.touch('s1', 'r0', a, 600, 0);
    ws.touch('s2', 'r0', a, 650, 10);
    ws.touch('s3', 'r1', a, 520, 20);
    assert.deepEqual({ ...ws.of('r0', 30), agents: [...ws.of('r0', 30).agents] }, { tokens: 500 + 100 + 150, sessions: 2, agents: [['agent-a', 500]] });
    assert.deepEqual([...ws.homesOf('agent-a', 30)].sort(), ['r0', 'r1']);
    // s1 moves to r1: off r0.
    ws.touch('s1', 'r1', a, 700, 40);
    assert.equal(ws.of('r0', 50).tokens, 500 + 150);
    assert.equal(ws.of('r1', 50).tokens, 500 + 20 + 200);
    // Past the window, idle sessions no longer count (s2 last seen at 10).
    assert.equal(ws.of('r0', 1_011).tokens, 0);
    assert.equal(ws.of('r1', 1_011).sessions, 2);
  });

  const set = (tokens: number, sessions: number, agents: [string, number][] = []) => ({ tokens, sessions, agents: new Map(agents) });
  /** placeByCapacity's input for `n` candidates, every one under its load bounds, with these fields over it. */
  const input = (n: number, o: Partial<PlacementInput> & Pick<PlacementInput, 'sets' | 'capacity' | 'agent' | 'ownTokens'>): PlacementInput => ({
    candidates: Array.from({ length: n }, (_, i) => view(`r${i}`)),
    indexed: new Array<boolean>(n).fill(false),
    loadOk: new Array<boolean>(n).fill(true),
    homeLoadOk: new Array<boolean>(n).fill(true),
    fill: 0.9,
    loadFactor: 2,
    homeLoadFactor: 2,
    ...o,
  });

  it('nothing fits anywhere: the replica where the session evicts least, its agent resident there', async () => {
    const { placeByCapacity } = await import('../../src/routing/placement.js');
    const p = placeByCapacity(input(3, {
      // r0 holds the agent (500) and is nearly full; r1 and r2 are fuller of other agents.
      sets: [set(900, 3, [['a', 500]]), set(850, 3, [['b', 400]]), set(950, 3, [['c', 400]])],
      capacity: [1000, 1000, 1000],
      agent: { key: 'a', tokens: 500 },
      ownTokens: 200,
      fill: 1,
    }));
    // r0: 900 + 200 − 1000 = 100 over; r1: 850 + 700 − 1000 = 550 over; r2: 650 over.
    assert.deepEqual(p, { index: 0, reason: 'capacity' });
  });

  it('nothing fits anywhere and the agent is new: it is contained where the cache already overflows, and the replica that still fits stays warm', async () => {
    const { placeByCapacity } = await import('../../src/routing/placement.js');
    const given = input(2, {
      // r0 holds 3 prompts and still fits; r1 holds 5 and already overflows.
      sets: [set(4500, 3, [['a', 1500], ['b', 1500], ['c', 1500]]), set(7500, 5, [['d', 1500], ['e', 1500], ['f', 1500], ['g', 1500], ['h', 1500]])],
      capacity: [6000, 6000],
      agent: { key: 'new', tokens: 1400 },
      ownTokens: 100,
    });
    assert.deepEqual(placeByCapacity(given), { index: 1, reason: 'capacity' });
    // Under the load bound, r1 may take no more: the session goes to r0 after all.
    assert.deepEqual(placeByCapacity({ ...given, loadOk: [true, false] }), { index: 0, reason: 'capacity' });
  });

  it('an agent new to the fleet goes where the most cache is free, not where the fewest sessions are', async () => {
    const { placeByCapacity } = await import('../../src/routing/placement.js');
    const p = placeByCapacity(input(2, {
      // r0: one session of a large agent; r1: two sessions of two small agents, more room left.
      sets: [set(3000, 1, [['big', 2800]]), set(1800, 2, [['s1', 800], ['s2', 800]])],
      capacity: [6000, 6000],
      agent: { key: 'new', tokens: 1900 },
      ownTokens: 100,
    }));
    // Fewest sessions would pick r0 (3000 + 2000 = 5000 of 5400); r1 keeps more room (3800 of 5400).
    assert.deepEqual(p, { index: 1, reason: 'placed' });
  });
});
