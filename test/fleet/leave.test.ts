import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { startFleet, startReplica, type SimFleet, type SimReplica } from '../../bench/sim/index.js';
import { resolveConfig } from '../../src/config/load.js';
import { removeReplicaSeries } from '../../src/telemetry/metrics.js';
import { startDnsStub, type DnsStub } from '../helpers/dns-stub.js';
import { simTurn, startGateway, type TestGateway } from '../helpers/gateway.js';
import { waitFor } from '../store/redis-server.js';

const NAME = 'vllm-headless.ns.svc.cluster.local';

const replicas = async (g: TestGateway) =>
  ((await (await request(`${g.adminUrl}/admin/replicas`)).body.json()) as { replicas: { name: string; state: string }[] }).replicas;
const metrics = async (g: TestGateway) => (await request(`${g.adminUrl}/metrics`)).body.text();

async function turn(g: TestGateway, key: string): Promise<string> {
  // Streamed: only a streamed answer's first token is a TTFT the cost model learns from.
  const t = await simTurn(g, [{ role: 'user', content: `I am ${key}` }], { session: key, stream: true });
  assert.equal(t.status, 200);
  return t.replica;
}

describe('an address already in the fleet through another upstream', () => {
  let dns: DnsStub;
  let pod: SimReplica;
  let g: TestGateway;
  before(async () => {
    pod = await startReplica({ host: '127.0.0.2', port: 0, outputTokens: { min: 2, max: 2 } });
    dns = await startDnsStub();
    dns.set(NAME, ['127.0.0.2']);
    g = await startGateway([], {
      // The same pod listed statically (named as discovery names its members) and behind the DNS name.
      upstreams: [{ name: `127.0.0.2:${pod.port}`, url: pod.url }, { url: `dns://${NAME}:${pod.port}` }],
      discovery: { intervalMs: 100, servers: [dns.server] },
    });
  });
  after(async () => {
    await g.close();
    await dns.close();
    await pod.close();
  });

  it('stays its first owner\'s: counted once as a conflict, and not drained when the DNS name drops it', async () => {
    await waitFor('the conflict', async () => /warmroute_fleet_changes_total\{change="name_conflict"\} 1\b/.test(await metrics(g)), 5_000);
    // The name now resolves elsewhere: its own members change, the static replica does not.
    dns.set(NAME, ['127.0.0.3']);
    await waitFor('the new DNS member', async () => (await replicas(g)).some((r) => r.name.startsWith('127.0.0.3:')), 5_000);
    const mine = (await replicas(g)).find((r) => r.name === `127.0.0.2:${pod.port}`);
    assert.ok(mine, 'the static replica is still in the fleet');
    assert.notEqual(mine.state, 'draining');
    assert.match(await metrics(g), /warmroute_fleet_changes_total\{change="name_conflict"\} 1\b/, 'warned about once, not every refresh');
    assert.ok(!g.logs.some((l) => l.msg === 'replica left the fleet'));
  });
});

describe('a replica that leaves the fleet', () => {
  let fleet: SimFleet;
  let g: TestGateway;
  before(async () => {
    fleet = await startFleet({ replicas: 2, outputTokens: { min: 2, max: 2 } });
    g = await startGateway([], { upstreams: [{ name: 'r0', url: fleet.urls[0] }, { name: 'r1', url: fleet.urls[1] }] });
  });
  after(async () => {
    await g.close();
    await fleet.close();
  });

  it('takes what the gateway learned of it along: its cost fit now, its metric series once scraped a last time', async () => {
    const served = new Set<string>();
    for (let k = 0; k < 40 && served.size < 2; k++) served.add(await turn(g, `s${k}`));
    assert.deepEqual([...served].sort(), ['r0', 'r1']);
    assert.ok(g.gw.router.stats().costByReplica.has('r1'));
    assert.match(await metrics(g), /replica="r1"/);

    g.gw.reconfigure(resolveConfig({ upstreams: [{ name: 'r0', url: fleet.urls[0] }] }));
    await waitFor('r1 to leave', async () => !(await replicas(g)).some((r) => r.name === 'r1'), 5_000);
    assert.ok(!g.gw.router.stats().costByReplica.has('r1'), 'its learned costs are gone');
    assert.doesNotMatch(await metrics(g), /warmroute_(inflight|queued|sessions_pinned|replica_up)\{replica="r1"\}/, 'its gauges go at once');

    // Its counters stay a while for Prometheus to see their last values; then they go as well.
    await removeReplicaSeries(g.gw.metrics, 'r1');
    assert.doesNotMatch(await metrics(g), /replica="r1"/);
    assert.match(await metrics(g), /replica="r0"/, 'only that replica\'s');
  });
});
