import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { startFleet, type SimFleet } from '../../bench/sim/index.js';
import { simTurn, startGateway, type TestGateway } from '../helpers/gateway.js';
import { counterSum, waitFor } from '../store/redis-server.js';

async function turn(g: TestGateway, session: string | null, content = 'Hello, what can you do for me today?'): Promise<string> {
  const t = await simTurn(g, [{ role: 'system', content: 'You are a concise voice agent. '.repeat(20) }, { role: 'user', content }], { session, maxTokens: 4 });
  assert.equal(t.status, 200);
  return t.replica;
}

const adminReplicas = async (g: TestGateway) =>
  ((await (await request(`${g.adminUrl}/admin/replicas`)).body.json()) as { replicas: Record<string, any>[] }).replicas;

// Probes and scrapes are driven by the test (long intervals), so each check is one call.
const MANUAL = { health: { probeIntervalMs: 600_000, statsIntervalMs: 0, unhealthyThreshold: 3, healthyThreshold: 2 } };

describe('active checks: down after N failed checks, up after M passed ones', () => {
  let fleet: SimFleet;
  let g: TestGateway;
  before(async () => {
    fleet = await startFleet({ replicas: 2 });
    g = await startGateway(fleet.urls, MANUAL);
  });
  after(async () => {
    await g.close();
    await fleet.close();
  });

  it('one or two failed checks do not flap a replica; the third marks it down; two passes bring it back', async () => {
    const sick = fleet.replicas[0];
    const r = g.gw.registry.byName(`127.0.0.1:${sick.port}`)!;
    sick.fault({ kind: 'unhealthy' });
    await g.gw.health.probeAll();
    await g.gw.health.probeAll();
    assert.equal(r.up, true, 'two failed checks: still up');
    await g.gw.health.probeAll();
    assert.equal(r.up, false, 'three failed checks: down');
    assert.equal((await adminReplicas(g)).find((x) => x.name === r.name)!.state, 'down');
    sick.clearFaults();
    await g.gw.health.probeAll();
    assert.equal(r.up, false, 'one passed check: still down');
    await g.gw.health.probeAll();
    assert.equal(r.up, true, 'two passed checks: up');
    assert.equal(await counterSum(g.gw.metrics.healthTransitions, ['to', 'down']), 1);
    assert.ok(g.logs.some((l) => l.level === 40 && l.msg.startsWith('replica back') && l.replica === r.name));
  });
});

describe('warm state across an outage', () => {
  let fleet: SimFleet;
  let g: TestGateway;
  before(async () => {
    fleet = await startFleet({ replicas: 2 });
    g = await startGateway(fleet.urls, { ...MANUAL, routing: { options: { prefixTtlMs: 1_500 } } });
  });
  after(async () => {
    await g.close();
    await fleet.close();
  });

  async function onReplica(i: number): Promise<{ session: string; name: string }> {
    const name = `127.0.0.1:${fleet.replicas[i].port}`;
    for (let k = 0; k < 200; k++) {
      const session = `warm-${i}-${k}`;
      if ((await turn(g, session)) === name) return { session, name };
    }
    throw new Error(`no new session was placed on ${name} in 200 tries`);
  }
  const prefixTokens = (name: string) => g.gw.router.stats().prefixTokensByReplica.get(name) ?? 0;

  it('a short outage keeps the prefix index and the pins; a restart seen in /metrics forgets them', async () => {
    const { session, name } = await onReplica(0);
    const sim = fleet.replicas[0];
    assert.ok(prefixTokens(name) > 0);
    sim.fault({ kind: 'unhealthy' });
    for (let i = 0; i < 3; i++) await g.gw.health.probeAll();
    assert.equal(g.gw.registry.byName(name)!.up, false);
    sim.clearFaults();
    for (let i = 0; i < 2; i++) await g.gw.health.probeAll();
    assert.equal(g.gw.registry.byName(name)!.up, true);
    assert.ok(prefixTokens(name) > 0, 'the prefix index survives a short outage');
    assert.equal(g.gw.router.session(session)?.replica, name, 'the pin survives a short outage');
    assert.equal(await counterSum(g.gw.metrics.warmStateForgotten), 0);

    // Restarted between two scrapes (no check failed): a new process start time.
    sim.fault({ kind: 'restart' });
    await g.gw.health.scrapeAll();
    assert.equal(prefixTokens(name), 0, 'a restarted replica holds nothing warm');
    assert.equal(g.gw.router.session(session), null, 'its pins are forgotten');
    assert.equal(await counterSum(g.gw.metrics.warmStateForgotten, ['cause', 'restart']), 1);
  });

  it('a restart is also seen from prefix-cache counters going backwards', async () => {
    const { name } = await onReplica(1);
    const r = g.gw.registry.byName(name)!;
    await g.gw.health.scrapeAll();
    r.startTimeSeconds = null; // as from a vLLM that exports no process start time
    r.prefixQueries = (r.prefixQueries ?? 0) + 1_000_000;
    await g.gw.health.scrapeAll();
    assert.equal(prefixTokens(name), 0);
    assert.equal(await counterSum(g.gw.metrics.warmStateForgotten, ['cause', 'restart']), 2);
  });

  it('an outage longer than the prefix TTL forgets the pins', async () => {
    const { session, name } = await onReplica(0);
    const sim = fleet.replicas[0];
    sim.fault({ kind: 'unhealthy' });
    for (let i = 0; i < 3; i++) await g.gw.health.probeAll();
    await new Promise((r) => setTimeout(r, 1_600));
    sim.clearFaults();
    for (let i = 0; i < 2; i++) await g.gw.health.probeAll();
    // Back cold: warmed with the shared system prompt first, then in.
    await waitFor('back in after its warmup', () => g.gw.registry.byName(name)!.up, 5_000);
    assert.equal(g.gw.router.session(session), null);
    assert.equal(await counterSum(g.gw.metrics.warmStateForgotten, ['cause', 'long_outage']), 1);
    assert.equal(await counterSum(g.gw.metrics.warmups, ['reason', 'long_outage']), 1);
  });
});

describe('scrape staleness', () => {
  let server: Server;
  let g: TestGateway;
  let failing = false;
  before(async () => {
    server = createServer((req, res) => {
      if (req.url === '/health') return res.end();
      if (req.url === '/v1/models') return res.end('{"object":"list","data":[{"id":"m"}]}');
      if (req.url === '/metrics') {
        if (failing) { res.statusCode = 500; return res.end(); }
        return res.end('vllm:num_requests_waiting{engine="0"} 7.0\nvllm:num_requests_running{engine="0"} 3.0\nvllm:kv_cache_usage_perc{engine="0"} 0.6\n');
      }
      res.statusCode = 404;
      res.end();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    g = await startGateway([`http://127.0.0.1:${(server.address() as AddressInfo).port}`], MANUAL);
  });
  after(async () => {
    await g.close();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  it('a failed scrape keeps the last load figures and shows their age; it is never read as no load', async () => {
    const r = g.gw.registry.replicas[0];
    assert.equal(r.waiting, 7);
    const first = r.lastScrapeAt!;
    failing = true;
    await new Promise((res) => setTimeout(res, 50));
    await g.gw.health.scrapeAll();
    assert.equal(r.waiting, 7, 'still the last known queue');
    assert.equal(r.kvUsage, 0.6);
    assert.equal(r.lastScrapeAt, first);
    const view = (await adminReplicas(g))[0];
    assert.ok(view.scrapeAgeMs >= 50, `scrapeAgeMs ${view.scrapeAgeMs}`);
    assert.equal(view.waiting, 7);
    const metrics = await (await request(`${g.adminUrl}/metrics`)).body.text();
    const age = Number(/^warmroute_replica_scrape_age_seconds\{replica="[^"]+"\} (\S+)$/m.exec(metrics)?.[1]);
    assert.ok(age >= 0.05, `scrape age gauge ${age}`);
    failing = false;
    await g.gw.health.scrapeAll();
    assert.ok(r.lastScrapeAt! > first);
    // The age now counts from the new scrape: what it was just before the admin call up to what it
    // was just after. (Not "under 50 ms": nothing scrapes again, so on a slow machine the age of a
    // fresh scrape can pass any fixed bound before the admin call reads it.)
    const from = Date.now() - r.lastScrapeAt!;
    const fresh = (await adminReplicas(g))[0].scrapeAgeMs;
    const to = Date.now() - r.lastScrapeAt!;
    assert.ok(fresh >= from && fresh <= to, `scrapeAgeMs ${fresh}, the last scrape ${from}–${to} ms ago`);
  });
});
