import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startFleet, type SimFleet } from '../../bench/sim/index.js';
import { startFixture, type FixtureUpstream } from '../helpers/fixture-upstream.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';

async function probes(g: TestGateway): Promise<string> {
  return (await g.gw.metrics.registry.getSingleMetricAsString('warmroute_token_ratio_probes_total'));
}

describe('the token ratio is known when a replica joins, before any answer (placement under KV pressure reads it)', () => {
  let fleet: SimFleet;
  let fixture: FixtureUpstream;
  let g: TestGateway;
  let h: TestGateway;
  before(async () => {
    fleet = await startFleet({ replicas: 1 });
    fixture = await startFixture();
    // The simulator makes one token of every 4 bytes; an estimate of 2 bytes a token is 2× too many.
    g = await startGateway(fleet.urls, { routing: { identity: { bytesPerToken: 2 } } });
    h = await startGateway([fixture.url]);
  });
  after(async () => {
    await g?.close();
    await h?.close();
    await fleet?.close();
    await fixture?.close();
  });

  it('one /tokenize of a fixed text sets the scale, with no chat request sent', async () => {
    await waitFor('the probe', async () => /outcome="learned"\} 1/.test(await probes(g)), 5_000);
    const scale = g.gw.router.stats().tokenScale;
    assert.ok(Math.abs(scale - 0.5) < 0.02, `scale ${scale}, want 0.5`);
  });

  it('a replica without the endpoint is counted and left to the answers, loudly', async () => {
    await waitFor('the probe', async () => /outcome="unsupported"\} 1/.test(await probes(h)), 5_000);
    assert.equal(h.gw.router.stats().tokenScale, 1);
    assert.ok(h.logs.some((l) => l.level === 40 && /tokenize/.test(l.msg)), 'a warning says so');
  });
});
