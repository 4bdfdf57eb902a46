import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startFleet, type SimFleet } from '../../bench/sim/index.js';
import { simTurn, startGateway, type TestGateway } from '../helpers/gateway.js';
import { counterSum, waitFor } from '../store/redis-server.js';

const agent = (i: number) => `Agent ${i} of the hotel chain. ${'Booking policy and tone. '.repeat(60 + 10 * i)}`;

/** One request; the replica that served it. */
async function call(g: TestGateway, system: string, user: string): Promise<string> {
  const t = await simTurn(g, [{ role: 'system', content: system }, { role: 'user', content: user }]);
  assert.equal(t.status, 200);
  return t.replica;
}

describe('deploy warmup: a replica that comes back cold gets the hottest shared prefixes first', () => {
  let fleet: SimFleet;
  let g: TestGateway;
  before(async () => {
    fleet = await startFleet({ replicas: 2, outputTokens: { min: 2, max: 2 } });
    g = await startGateway(fleet.urls, { health: { probeIntervalMs: 600_000, statsIntervalMs: 0 }, warmup: { topK: 2, concurrency: 1 } });
  });
  after(async () => {
    await g.close();
    await fleet.close();
  });

  it('top K by traffic, one token each, before it takes sessions; counted by reason, duration logged', async () => {
    // Traffic: agent 0 most, then agent 1, agent 2 least.
    for (const [i, n] of [[0, 9], [1, 6], [2, 2]] as const) for (let k = 0; k < n; k++) await call(g, agent(i), `caller ${i}-${k}`);
    assert.equal(g.gw.fleet.hot.size(), 3);
    assert.ok(g.gw.fleet.hot.bytes() > 0 && g.gw.fleet.hot.bytes() <= 8 * 1024 * 1024);
    const sim = fleet.replicas[0];
    const name = `127.0.0.1:${sim.port}`;
    const earlier = sim.requests().length;
    // Slowed (20x), its warmup lasts seconds instead of ~0.2 s: long enough to see and to route around.
    sim.fault({ kind: 'slow', factor: 20 });
    sim.fault({ kind: 'restart' });
    const scraped = g.gw.health.scrapeAll();
    const r = g.gw.registry.byName(name)!;
    await waitFor('warming', () => r.warming, 2_000);
    // Out while it warms: the replica is not offered to routing, whichever agent's prefix it held.
    assert.equal(r.up, false);
    for (const i of [0, 1, 2]) assert.notEqual(await call(g, agent(i), `while warming ${i}`), name, `agent ${i} sent to the warming replica`);
    assert.ok(r.warming, 'still warming: the calls above were routed while it was');
    sim.clearFaults('slow');
    await scraped;
    await waitFor('back in', () => r.up, 10_000);
    assert.equal(await counterSum(g.gw.metrics.warmups, ['reason', 'restart']), 1);
    const sent = sim.requests().slice(earlier);
    assert.equal(sent.length, 2, 'the two hottest prefixes, not the third');
    assert.ok(sent.every((r) => r.completionTokens === 1));
    // Agent 0's prompt (~60 repeats) and agent 1's (~70), not agent 2's (~80).
    const sizes = sent.map((r) => r.promptTokens).sort((a, b) => a - b);
    assert.ok(sizes[1] < 490, `prompt tokens ${sizes}`); // agent 2 is ~520
    const line = g.logs.find((l) => l.msg.startsWith('warmup done'));
    assert.ok(line && line.reason === 'restart' && typeof line.ms === 'number' && line.prefixes === 2);
    // The next call of the hottest agent there is warm for its system prompt.
    for (let k = 0; k < 20 && sim.requests().length === earlier + 2; k++) await call(g, agent(0), `after ${k}`);
    const next = sim.requests()[earlier + 2];
    assert.ok(next.cachedTokens >= sent.find((r) => r.promptTokens === Math.min(...sent.map((x) => x.promptTokens)))!.promptTokens - 16);
  });

  it('the tracked prefixes stay within their memory budget, least used out first', async () => {
    const { createHotPrefixes } = await import('../../src/fleet/hot-prefixes.js');
    const { chatIdentity } = await import('../routing/helpers.js');
    const hot = createHotPrefixes({ maxBytes: 6_000 });
    const body = (i: number) => Buffer.from(JSON.stringify({ model: 'm', messages: [{ role: 'system', content: agent(i).slice(0, 1500) }, { role: 'user', content: 'x' }] }));
    const seen = (i: number) => hot.seen(chatIdentity(JSON.parse(body(i).toString()).messages), '/v1/chat/completions', body(i));
    for (let k = 0; k < 5; k++) seen(0);
    for (let k = 0; k < 3; k++) seen(1);
    // Seen twice each: a prefix is built on its second sighting.
    for (let i = 2; i < 8; i++) for (let k = 0; k < 2; k++) seen(i);
    assert.ok(hot.size() >= 3, 'later prefixes were built, and older ones evicted for them');
    assert.ok(hot.bytes() <= 6_000, `${hot.bytes()}`);
    const top = hot.top(2).map((p) => JSON.parse(p.body.toString()).messages[0].content.slice(0, 9));
    assert.deepEqual(top, ['Agent 0 o', 'Agent 1 o']);
  });

  it('a prefix is built on its second sighting: one that never repeats (a timestamp in the system prompt) is never parsed', async () => {
    const { createHotPrefixes } = await import('../../src/fleet/hot-prefixes.js');
    const { chatIdentity } = await import('../routing/helpers.js');
    const hot = createHotPrefixes({ maxBytes: 1 << 20 });
    const messages = [{ role: 'system', content: agent(0).slice(0, 500) }, { role: 'user', content: 'x' }];
    const body = Buffer.from(JSON.stringify({ model: 'm', messages }));
    hot.seen(chatIdentity(messages), '/v1/chat/completions', body);
    assert.equal(hot.size(), 0, 'not on its first sighting');
    hot.seen(chatIdentity(messages), '/v1/chat/completions', body);
    assert.equal(hot.size(), 1, 'built on its second');
    assert.equal(hot.top(1)[0].hits, 2);
  });
});
