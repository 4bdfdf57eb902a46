// What affinity buys on real vLLM replicas, against round-robin, and whether the simulator
// (bench/sim) claims the same: warm cached_tokens on a follow-up turn, and Responses API
// conversations (store: true) that only the replica holding them can continue.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startFleet, type SimFleet } from '../../bench/sim/index.js';
import type { FleetState } from '../../bench/real/fleet-vllm.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { RUN, getText, longText, postJson, realFleet, replicaOf } from './real-fleet.js';

interface Pair { warmroute: TestGateway; roundRobin: TestGateway }

async function gateways(upstreams: { url: string; name: string }[]): Promise<Pair> {
  return {
    warmroute: await startGateway([], { upstreams }),
    roundRobin: await startGateway([], { upstreams, routing: { strategy: 'round-robin' } }),
  };
}

/** Two turns of one session; the second turn's cached and prompt tokens, and where each went. */
async function twoTurns(g: TestGateway, model: string, seed: string) {
  const session = `two-turns-${seed}`;
  const system = { role: 'system', content: longText(seed) };
  const first = [system, { role: 'user', content: 'turn one' }];
  const t1 = await postJson(`${g.url}/v1/chat/completions`, { model, messages: first, max_tokens: 4, temperature: 0 }, { 'x-session-id': session });
  assert.equal(t1.status, 200, t1.text);
  const second = [...first, { role: 'assistant', content: t1.body.choices[0].message.content }, { role: 'user', content: 'turn two' }];
  const t2 = await postJson(`${g.url}/v1/chat/completions`, { model, messages: second, max_tokens: 4, temperature: 0 }, { 'x-session-id': session });
  assert.equal(t2.status, 200, t2.text);
  return {
    prompt: t2.body.usage.prompt_tokens as number,
    cached: (t2.body.usage.prompt_tokens_details?.cached_tokens ?? null) as number | null,
    replicas: [String(t1.headers['x-warmroute-replica']), String(t2.headers['x-warmroute-replica'])],
  };
}

/** A Responses conversation of `turns` turns chained by previous_response_id: each turn's status. */
async function conversation(g: TestGateway, model: string, turns: number, seed: string) {
  const statuses: number[] = [];
  const bodies: string[] = [];
  let previous: string | null = null;
  for (let i = 0; i < turns; i++) {
    const res = await postJson(`${g.url}/v1/responses`, {
      model, store: true, max_output_tokens: 4, temperature: 0,
      input: `${seed} turn ${i}`, ...(previous ? { previous_response_id: previous } : {}),
    });
    statuses.push(res.status);
    bodies.push(res.text);
    if (res.status === 200) previous = res.body.id;
  }
  return { statuses, bodies };
}

describe('real vLLM: affinity against round-robin, and what the simulator claims', () => {
  let f: FleetState;
  let real: Pair;
  let simFleet: SimFleet;
  let sim: Pair;
  before(async () => {
    f = await realFleet();
    real = await gateways(f.replicas.map((r) => ({ url: r.url, name: r.name })));
    simFleet = await startFleet({ replicas: f.replicas.length, model: f.model });
    sim = await gateways(simFleet.replicas.map((r, i) => ({ url: r.url, name: `sim-${i}` })));
  });
  after(async () => {
    for (const p of [real, sim]) if (p) { await p.warmroute.close(); await p.roundRobin.close(); }
    await simFleet?.close();
  });

  it('a warm follow-up turn: cached_tokens covers the conversation through warmroute, none through round-robin', async (t) => {
    const viaWarm = await twoTurns(real.warmroute, f.model, `${RUN}-warm`);
    const viaRr = await twoTurns(real.roundRobin, f.model, `${RUN}-rr`);
    assert.ok(viaWarm.prompt > 2800, `a ~2.9K-token prompt (${viaWarm.prompt})`);
    assert.equal(viaWarm.replicas[0], viaWarm.replicas[1], 'warmroute keeps the session on one replica');
    assert.notEqual(viaRr.replicas[0], viaRr.replicas[1], 'round-robin moves it');
    // vLLM caches whole 128-token blocks (CPU backend): all but the last partial block.
    assert.ok(viaWarm.cached !== null && viaWarm.cached >= viaWarm.prompt - 2 * 128, `warm: ${viaWarm.cached} of ${viaWarm.prompt} cached`);
    assert.equal(viaRr.cached, 0, `round-robin: ${viaRr.cached} of ${viaRr.prompt} cached`);
    // The gateway read the same figure out of vLLM's body into its own counter.
    const counted = (await getText(`${real.warmroute.adminUrl}/metrics`)).text.split('\n')
      .filter((l) => l.startsWith('warmroute_cached_tokens_total{')).reduce((n, l) => n + Number(l.split(' ').at(-1)), 0);
    assert.ok(counted >= viaWarm.cached, `warmroute_cached_tokens_total ${counted} counts the warm turn's ${viaWarm.cached}`);
    t.diagnostic(`vLLM turn 2: warmroute ${viaWarm.cached}/${viaWarm.prompt} cached (${viaWarm.replicas.join(' -> ')}), round-robin ${viaRr.cached}/${viaRr.prompt} (${viaRr.replicas.join(' -> ')})`);

    // The simulator claims the same (its blocks are 16 tokens).
    const simWarm = await twoTurns(sim.warmroute, f.model, `${RUN}-sim-warm`);
    const simRr = await twoTurns(sim.roundRobin, f.model, `${RUN}-sim-rr`);
    assert.ok(simWarm.cached !== null && simWarm.cached >= simWarm.prompt - 2 * 16, `sim warm: ${simWarm.cached} of ${simWarm.prompt}`);
    assert.equal(simRr.cached, 0, `sim round-robin: ${simRr.cached} of ${simRr.prompt}`);
    t.diagnostic(`simulator turn 2: warmroute ${simWarm.cached}/${simWarm.prompt} cached, round-robin ${simRr.cached}/${simRr.prompt}`);
  });

  it(`a Responses conversation with store: true over the fleet's replicas: every turn succeeds through warmroute, round-robin breaks it`, async () => {
    const turns = 2 * f.replicas.length;
    const viaWarm = await conversation(real.warmroute, f.model, turns, `${RUN}-resp-warm`);
    assert.deepEqual(viaWarm.statuses, Array(turns).fill(200), viaWarm.bodies.join('\n'));
    const viaRr = await conversation(real.roundRobin, f.model, turns, `${RUN}-resp-rr`);
    assert.equal(viaRr.statuses[0], 200);
    assert.equal(viaRr.statuses[1], 404, 'the second turn reaches a replica that never stored the first');
    assert.match(viaRr.bodies[1], /Response with id 'resp_[0-9a-f]+' not found\./, 'vLLM\'s own 404, passed through');

    const simWarm = await conversation(sim.warmroute, f.model, turns, `${RUN}-sim-resp-warm`);
    assert.deepEqual(simWarm.statuses, Array(turns).fill(200));
    const simRr = await conversation(sim.roundRobin, f.model, turns, `${RUN}-sim-resp-rr`);
    assert.deepEqual(simRr.statuses.slice(0, 2), viaRr.statuses.slice(0, 2), 'the simulator fails the same turn');
    const errOf = (t: string) => ({ ...JSON.parse(t).error, message: JSON.parse(t).error.message.replace(/resp_[0-9a-f]+/, 'resp_') });
    assert.deepEqual(errOf(simRr.bodies[1]), errOf(viaRr.bodies[1]), 'with vLLM\'s body');
  });

  it('which replica served each turn is named in x-warmroute-replica with the fleet\'s names', async () => {
    const r = await postJson(`${real.warmroute.url}/v1/chat/completions`, { model: f.model, messages: [{ role: 'user', content: `names ${RUN}` }], max_tokens: 1 });
    assert.ok(f.replicas.some((x) => x.name === replicaOf(f, r.headers)), String(r.headers['x-warmroute-replica']));
  });
});
