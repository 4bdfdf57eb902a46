import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { startFleet, type SimFleet } from '../../bench/sim/index.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { counterSum, waitFor } from '../store/redis-server.js';

const MODEL = 'google/gemma-4-31B-it';

interface Msg { role: string; content: string }
interface Turn { replica: string; route: string; promptTokens: number; cachedTokens: number; content: string }

// Each session its own ~1,500-token system prompt: nothing is warm anywhere but where it ran.
const history = (i: number): Msg[] => [
  { role: 'system', content: `Agent ${i}: you answer calls for branch ${i}. ${'Policy text that is long. '.repeat(240)}` },
  { role: 'user', content: `Hello, this is caller ${i}.` },
];

async function turn(g: TestGateway, key: string, messages: Msg[]): Promise<Turn> {
  const res = await request(`${g.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-session-id': key },
    body: JSON.stringify({ model: MODEL, max_tokens: 3, messages }),
  });
  const body = (await res.body.json()) as any;
  assert.equal(res.statusCode, 200, JSON.stringify(body));
  return {
    replica: String(res.headers['x-warmroute-replica']), route: String(res.headers['x-warmroute-route']),
    promptTokens: body.usage.prompt_tokens, cachedTokens: body.usage.prompt_tokens_details?.cached_tokens ?? 0,
    content: body.choices[0].message.content,
  };
}

const adminReplica = async (g: TestGateway, name: string) =>
  (((await (await request(`${g.adminUrl}/admin/replicas`)).body.json()) as { replicas: Record<string, any>[] }).replicas).find((r) => r.name === name)!;

describe('drain with warm handoff', () => {
  let fleet: SimFleet;
  let g: TestGateway;
  before(async () => {
    fleet = await startFleet({ replicas: 3, outputTokens: { min: 30, max: 30 } });
    g = await startGateway(fleet.urls, { health: { probeIntervalMs: 600_000 } });
  });
  after(async () => {
    await g.close();
    await fleet.close();
  });

  it('no new sessions, in-flight streams finish, each pinned session moves warm to its next choice', async () => {
    const n = 12;
    const hist = Array.from({ length: n }, (_, i) => history(i));
    const first = await Promise.all(hist.map((m, i) => turn(g, `call-${i}`, m)));
    const counts = new Map<string, number>();
    for (const t of first) counts.set(t.replica, (counts.get(t.replica) ?? 0) + 1);
    const victim = [...counts.entries()].sort((a, b) => b[1] - a[1])[0][0];
    const moved = first.map((t, i) => (t.replica === victim ? i : -1)).filter((i) => i >= 0);
    assert.ok(moved.length >= 2);

    // A session of the victim's whose stream is in flight when the drain starts.
    let longKey = '';
    for (let k = 0; !longKey && k < 200; k++) if ((await turn(g, `long-${k}`, [{ role: 'user', content: 'hi' }])).replica === victim) longKey = `long-${k}`;
    assert.ok(longKey, `no new session was placed on ${victim} in 200 tries`);
    const streaming = await request(`${g.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-session-id': longKey },
      body: JSON.stringify({ model: MODEL, stream: true, messages: [{ role: 'user', content: 'tell me a long story' }] }),
    });
    assert.equal(String(streaming.headers['x-warmroute-replica']), victim);

    const res = await request(`${g.adminUrl}/admin/replicas/${encodeURIComponent(victim)}/drain`, { method: 'POST' });
    assert.equal(res.statusCode, 202);
    assert.equal(((await res.body.json()) as { state: string }).state, 'draining');
    assert.equal((await request(`${g.adminUrl}/admin/replicas/nope/drain`, { method: 'POST' })).statusCode, 404);

    // The stream in flight on the draining replica finishes whole.
    const text = await streaming.body.text();
    assert.equal(streaming.statusCode, 200);
    assert.match(text, /data: \[DONE\]/);
    assert.ok(!text.includes('"error"'));

    await waitFor('the handoffs', async () => {
      const d = (await adminReplica(g, victim)).drain;
      // The streaming session is handed off a second time when its turn ends: wait for that one too.
      return d?.finishedAt != null && d.sessions === moved.length + 2 && d.pending === 0;
    }, 10_000);
    const view = await adminReplica(g, victim);
    assert.equal(view.state, 'draining');
    // Each pinned session once, and the streaming one again once its turn there ended (it re-pinned it).
    assert.equal(view.drain.sessions, moved.length + 2);
    assert.equal(view.drain.warmed, moved.length + 2, JSON.stringify(view.drain));
    assert.equal(view.drain.pending, 0);
    assert.equal(await counterSum(g.gw.metrics.handoffs, ['outcome', 'warmed']), moved.length + 2);
    assert.notEqual(g.gw.router.session(longKey)!.replica, victim, 'the streaming session left too');

    for (const i of moved) {
      const pin = g.gw.router.session(`call-${i}`)!;
      assert.notEqual(pin.replica, victim, 'the pin moved before the next turn');
      const next = await turn(g, `call-${i}`, [...hist[i], { role: 'assistant', content: first[i].content }, { role: 'user', content: 'And my balance?' }]);
      assert.equal(next.replica, pin.replica);
      assert.equal(next.route, 'pinned');
      // Warm: everything the replayed prompt held (the whole previous prompt) is cached there.
      assert.ok(next.cachedTokens >= first[i].promptTokens - 16, `session ${i}: ${next.cachedTokens} cached of ${first[i].promptTokens} replayed`);
    }
    for (let k = 0; k < 15; k++) assert.notEqual((await turn(g, `new-${k}`, history(100 + k))).replica, victim, 'no new session on a draining replica');

    const back = await request(`${g.adminUrl}/admin/replicas/${encodeURIComponent(victim)}/undrain`, { method: 'POST' });
    assert.equal(back.statusCode, 202);
    assert.equal(((await back.body.json()) as { state: string }).state, 'up');
  });
});

describe('drain without handoff', () => {
  let fleet: SimFleet;
  let g: TestGateway;
  before(async () => {
    fleet = await startFleet({ replicas: 2, outputTokens: { min: 3, max: 3 } });
    g = await startGateway(fleet.urls, { health: { probeIntervalMs: 600_000 }, handoff: { enabled: false } });
  });
  after(async () => {
    await g.close();
    await fleet.close();
  });

  it('the moved session re-prefills its prompt on its next replica (what the handoff saves)', async () => {
    const hist = Array.from({ length: 6 }, (_, i) => history(i));
    const first = await Promise.all(hist.map((m, i) => turn(g, `cold-${i}`, m)));
    const victim = first[0].replica;
    await request(`${g.adminUrl}/admin/replicas/${encodeURIComponent(victim)}/drain`, { method: 'POST' });
    await waitFor('the drain', async () => (await adminReplica(g, victim)).drain?.finishedAt != null);
    const moved = first.map((t, i) => (t.replica === victim ? i : -1)).filter((i) => i >= 0);
    assert.equal(await counterSum(g.gw.metrics.handoffs, ['outcome', 'cold']), moved.length);
    for (const i of moved) {
      const next = await turn(g, `cold-${i}`, [...hist[i], { role: 'assistant', content: first[i].content }, { role: 'user', content: 'And my balance?' }]);
      assert.notEqual(next.replica, victim);
      assert.equal(next.route, 'failover');
      assert.ok(next.cachedTokens < first[i].promptTokens / 4, `cold: ${next.cachedTokens} cached`);
    }
  });
});
