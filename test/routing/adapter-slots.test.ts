import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { request } from 'undici';
import { startReplica, type SimReplica } from '../../bench/sim/index.js';
import { FAST } from '../sim/helpers.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';

const BASE = 'base-m';
const ADAPTERS = { a: '/ad/a', b: '/ad/b', c: '/ad/c', d: '/ad/d' };

interface Fleet { g: TestGateway; sims: SimReplica[]; close(): Promise<void> }

/** Two simulated replicas serving the same adapters with `maxLoras` slots each, behind a gateway whose scrapes are frequent. */
async function fleet(maxLoras: number, routing: Record<string, unknown> = {}): Promise<Fleet> {
  const sims = [
    await startReplica({ ...FAST, name: 'r1', model: BASE, maxLoras, loraModules: ADAPTERS }),
    await startReplica({ ...FAST, name: 'r2', model: BASE, maxLoras, loraModules: ADAPTERS }),
  ];
  const g = await startGateway([], { upstreams: sims.map((s) => ({ name: s.name, url: s.url })), health: { statsIntervalMs: 50 }, routing: { options: routing } });
  await waitFor('LoRA slots scraped', async () => (await replicasView(g)).every((r) => r.lora !== null));
  return { g, sims, close: async () => { await g.close(); await Promise.all(sims.map((s) => s.close())); } };
}

async function replicasView(g: TestGateway): Promise<any[]> {
  return ((await (await request(`${g.adminUrl}/admin/replicas`)).body.json()) as any).replicas;
}

/** One turn of a keyed session: where it went and why. */
async function turn(g: TestGateway, session: string, model: string, system: string, turns = 1): Promise<{ replica: string; route: string }> {
  const messages: { role: string; content: string }[] = [{ role: 'system', content: system }];
  for (let i = 0; i < turns; i++) messages.push({ role: 'user', content: `question ${i} of ${session}` }, ...(i < turns - 1 ? [{ role: 'assistant', content: `answer ${i}` }] : []));
  const res = await request(`${g.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-session-id': session },
    body: JSON.stringify({ model, max_tokens: 2, messages }),
  });
  await res.body.text();
  assert.equal(res.statusCode, 200);
  return { replica: String(res.headers['x-warmroute-replica']), route: String(res.headers['x-warmroute-route']) };
}

/** Adapter → the replicas its sessions went to. */
function homes(placed: [string, string][]): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  for (const [adapter, replica] of placed) {
    if (!out.has(adapter)) out.set(adapter, new Set());
    out.get(adapter)!.add(replica);
  }
  return out;
}

describe('placement by LoRA slots', () => {
  it('with one slot per replica, each adapter’s sessions (several agents each) go to one replica, the two adapters to different ones', async () => {
    const f = await fleet(1);
    try {
      const placed: [string, string][] = [];
      for (let i = 0; i < 4; i++) {
        for (const adapter of ['a', 'b']) {
          // Three agents (system prompts) per adapter, so prefix affinity alone would not group them.
          const t = await turn(f.g, `${adapter}-${i}`, adapter, `You are agent ${i % 3} of tenant ${adapter}.`);
          placed.push([adapter, t.replica]);
        }
      }
      const h = homes(placed);
      assert.equal(h.get('a')!.size, 1, `a went to ${[...h.get('a')!]}`);
      assert.equal(h.get('b')!.size, 1, `b went to ${[...h.get('b')!]}`);
      assert.notEqual([...h.get('a')!][0], [...h.get('b')!][0]);
      // The turns that followed keep their replica.
      for (const [adapter, replica] of [['a', [...h.get('a')!][0]], ['b', [...h.get('b')!][0]]] as const) {
        assert.equal((await turn(f.g, `${adapter}-0`, adapter, `You are agent 0 of tenant ${adapter}.`, 2)).replica, replica);
      }
      // No request ever waited for a slot: each replica only ever ran one adapter.
      for (const s of f.sims) {
        const text = await (await request(`${s.url}/metrics`)).body.text();
        const seen = new Set([...text.matchAll(/running_lora_adapters="([^"]*)"/g)].flatMap((m) => m[1].split(',').filter(Boolean)));
        assert.ok(seen.size <= 1, `${s.name} ran ${[...seen]}`);
      }
    } finally {
      await f.close();
    }
  });

  it('with two slots per replica, four adapters settle two per replica and stay there', async () => {
    const f = await fleet(2);
    try {
      const placed: [string, string][] = [];
      for (let i = 0; i < 3; i++) {
        for (const adapter of ['a', 'b', 'c', 'd']) placed.push([adapter, (await turn(f.g, `${adapter}-${i}`, adapter, `Tenant ${adapter}, agent ${i}.`)).replica]);
      }
      const h = homes(placed);
      for (const [adapter, where] of h) assert.equal(where.size, 1, `${adapter} went to ${[...where]}`);
      const perReplica = new Map<string, number>();
      for (const where of h.values()) for (const r of where) perReplica.set(r, (perReplica.get(r) ?? 0) + 1);
      assert.deepEqual([...perReplica.values()].sort(), [2, 2]);
    } finally {
      await f.close();
    }
  });

  it('a pinned session leaves a replica where its adapter would wait for a slot when the wait costs more than its warm prefix saves, and only then', async () => {
    for (const [weight, expected] of [[10, 'adapter'], [0.5, 'pinned']] as const) {
      // Every adapter sent is at once left to what the scrapes say of it; no cooldown holds the session.
      const f = await fleet(1, { adapterBusyMs: 0, spillCooldownMs: 0, weights: { adapterSlot: weight } });
      try {
        const first = await turn(f.g, 's', 'b', 'You are a support agent.');
        const home = f.sims.find((s) => s.name === first.replica)!;
        // Another adapter takes home's one slot with a long generation, sent to it directly.
        home.fault({ kind: 'slow', factor: 20 });
        const long = request(`${home.url}/v1/chat/completions`, {
          method: 'POST', headers: { 'content-type': 'application/json' },
          // Long enough (slowed) to outlast the next turn's decision; a turn that stays waits it out.
          body: JSON.stringify({ model: 'a', max_tokens: 60, ignore_eos: true, messages: [{ role: 'user', content: 'long' }] }),
        }).then((r) => r.body.text());
        await waitFor('the gateway sees adapter a running there', async () => (await replicasView(f.g)).find((r) => r.name === home.name)?.lora?.running.includes('a') === true);
        const next = await turn(f.g, 's', 'b', 'You are a support agent.', 2);
        assert.equal(next.route, expected, `weight ${weight}`);
        assert.equal(next.replica === home.name, expected === 'pinned', `weight ${weight}`);
        home.clearFaults('slow');
        await long;
      } finally {
        await f.close();
      }
    }
  });

  it('a request that can only go where it waits for a slot is counted and warned about', async () => {
    const f = await fleet(1, { adapterBusyMs: 0 });
    try {
      // Each replica's one slot held by another adapter, with long generations sent to it directly.
      const longs = f.sims.map((s, i) => {
        s.fault({ kind: 'slow', factor: 20 });
        return request(`${s.url}/v1/chat/completions`, {
          method: 'POST', headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: ['b', 'c'][i], max_tokens: 200, ignore_eos: true, messages: [{ role: 'user', content: 'long' }] }),
        }).then((r) => r.body.text());
      });
      await waitFor('the gateway sees both slots held', async () => (await replicasView(f.g)).every((r) => r.lora?.running.length === 1));
      for (const s of f.sims) s.clearFaults('slow');
      const t = await turn(f.g, 'w', 'a', 'You are a tenant of a.');
      const metrics = await (await request(`${f.g.adminUrl}/metrics`)).body.text();
      assert.match(metrics, new RegExp(`warmroute_adapter_slot_waits_total\\{replica="${t.replica}"\\} 1`));
      assert.ok(f.g.logs.some((l) => l.level === 40 && /waits for a LoRA slot/.test(l.msg)));
      await Promise.all(longs);
    } finally {
      await f.close();
    }
  });
});
