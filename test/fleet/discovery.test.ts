import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startReplica, type SimReplica } from '../../bench/sim/index.js';
import { startDnsStub, type DnsStub } from '../helpers/dns-stub.js';
import { simTurn, startGateway, type TestGateway } from '../helpers/gateway.js';
import { counterSum, waitFor } from '../store/redis-server.js';

const NAME = 'vllm-headless.ns.svc.cluster.local';
const SYSTEM = `You are the front desk agent. ${'House rules and menu. '.repeat(120)}`;

/** Simulated replicas on distinct loopback addresses and one port: what a headless Service's pods look like. */
async function podsOnOnePort(hosts: string[]): Promise<SimReplica[]> {
  for (let attempt = 0; ; attempt++) {
    const pods: SimReplica[] = [];
    try {
      pods.push(await startReplica({ host: hosts[0], port: 0, outputTokens: { min: 3, max: 3 } }));
      for (const h of hosts.slice(1)) pods.push(await startReplica({ host: h, port: pods[0].port, outputTokens: { min: 3, max: 3 } }, pods.length));
      return pods;
    } catch (e) {
      await Promise.all(pods.map((p) => p.close()));
      if (attempt > 10) throw e;
    }
  }
}

async function turn(g: TestGateway, key: string): Promise<{ replica: string; route: string }> {
  const t = await simTurn(g, [{ role: 'system', content: SYSTEM }, { role: 'user', content: `I am ${key}` }], { session: key });
  assert.equal(t.status, 200);
  return t;
}

describe('DNS discovery (dns://name:port, a headless Service)', () => {
  let dns: DnsStub;
  let pods: SimReplica[];
  let g: TestGateway;
  const member = (i: number) => `127.0.0.${i + 2}:${pods[0].port}`;
  before(async () => {
    pods = await podsOnOnePort(['127.0.0.2', '127.0.0.3', '127.0.0.4']);
    dns = await startDnsStub();
    dns.set(NAME, ['127.0.0.2', '127.0.0.3']);
    g = await startGateway([], {
      upstreams: [{ url: `dns://${NAME}:${pods[0].port}` }],
      discovery: { intervalMs: 150, servers: [dns.server] },
      health: { probeIntervalMs: 600_000 },
    });
  });
  after(async () => {
    await g.close();
    await dns.close();
    await Promise.all(pods.map((p) => p.close()));
  });

  it('resolves the name into one replica per address, through a real DNS server', async () => {
    assert.deepEqual(g.gw.registry.replicas.map((r) => r.name).sort(), [member(0), member(1)]);
    assert.ok(g.gw.registry.replicas.every((r) => r.up && r.source.kind === 'dns'));
    assert.ok(dns.queries() >= 2);
  });

  it('a new address joins after a warmup with the hottest shared prefix, and takes new sessions at once', async () => {
    const before = new Map<string, string>();
    for (let i = 0; i < 20; i++) before.set(`old-${i}`, (await turn(g, `old-${i}`)).replica);
    assert.equal(pods[2].counters().requests, 0);
    dns.set(NAME, ['127.0.0.2', '127.0.0.3', '127.0.0.4']);
    await waitFor('the new pod to join and take traffic', () => g.gw.registry.byName(member(2))?.up === true, 5_000);
    // Warmed before taking sessions: the shared system prompt, one token.
    assert.equal(await counterSum(g.gw.metrics.warmups, ['reason', 'join']), 1);
    const warm = pods[2].requests();
    assert.equal(warm.length, 1);
    assert.ok(warm[0].promptTokens >= 400 && warm[0].completionTokens === 1, JSON.stringify(warm[0]));
    assert.ok(g.logs.some((l) => l.msg.startsWith('warmup done') && l.replica === member(2) && typeof l.ms === 'number'));

    let onNew = 0;
    for (let i = 0; i < 30; i++) if ((await turn(g, `new-${i}`)).replica === member(2)) onNew++;
    // Rendezvous over names that carry a random port: the new replica's share of 30 keys is
    // Binomial(30, 1/3). At least 2 fails a working gateway with p ≈ 1e-4 (at least 4 did with p ≈ 0.3%).
    assert.ok(onNew >= 2, `new sessions on the joined replica: ${onNew} of 30`);
    // The new replica's first session turns are warm for the shared prompt.
    const firstReal = pods[2].requests().find((r) => r.completionTokens !== 1);
    assert.ok(firstReal && firstReal.cachedTokens >= warm[0].promptTokens - 16, 'warmup made the shared prefix a hit');
    for (const [k, rep] of before) assert.equal((await turn(g, k)).replica, rep, `${k} stayed pinned`);
  });

  it('an address that vanishes is drained with handoff, then removed; only its own sessions move', async () => {
    const keys = Array.from({ length: 30 }, (_, i) => `s-${i}`);
    const was = new Map<string, string>();
    for (const k of keys) was.set(k, (await turn(g, k)).replica);
    const gone = member(0);
    dns.set(NAME, ['127.0.0.3', '127.0.0.4']);
    await waitFor('the vanished pod to leave', () => g.gw.registry.byName(gone) === undefined, 5_000);
    assert.equal(await counterSum(g.gw.metrics.fleetChanges, ['change', 'left']), 1);
    const itsSessions = [...was.values()].filter((r) => r === gone).length;
    assert.ok(itsSessions > 0, 'some sessions were on the pod that vanishes');
    assert.ok(await counterSum(g.gw.metrics.handoffs, ['outcome', 'warmed']) >= itsSessions);
    for (const k of keys) {
      const now = await turn(g, k);
      if (was.get(k) === gone) assert.notEqual(now.replica, gone);
      else assert.equal(now.replica, was.get(k), `${k} did not belong to the vanished pod and stayed`);
    }
    // A DNS answer with nothing in it does not empty the fleet.
    dns.set(NAME, []);
    await waitFor('the empty answer to be seen', () => g.logs.some((l) => l.msg.startsWith('DNS name resolves to nothing')), 5_000);
    assert.equal(g.gw.registry.replicas.length, 2);
    assert.equal(g.logs.find((l) => l.msg.startsWith('DNS name resolves to nothing'))!.kept, 2);
  });
});
