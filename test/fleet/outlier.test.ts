import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startFleet, type SimFleet } from '../../bench/sim/index.js';
import { simTurn, startGateway, type TestGateway } from '../helpers/gateway.js';
import { counterSum, waitFor } from '../store/redis-server.js';

const turn = (g: TestGateway, session: string) => simTurn(g, [{ role: 'user', content: 'hi there' }], { session });

/** Sends distinct sessions until `n` requests have landed on `name`; returns the statuses seen there. */
async function hit(g: TestGateway, name: string, n: number, tag: string): Promise<number[]> {
  const seen: number[] = [];
  for (let k = 0; seen.length < n && k < 400; k++) {
    const r = await turn(g, `${tag}-${k}`);
    if (r.replica === name) seen.push(r.status);
  }
  return seen;
}

// No active checks during these tests: only real traffic can take a replica out.
const PASSIVE = { health: { probeIntervalMs: 600_000, statsIntervalMs: 0 } };

describe('passive outlier detection', () => {
  let fleet: SimFleet;
  let g: TestGateway;
  before(async () => {
    fleet = await startFleet({ replicas: 4, outputTokens: { min: 2, max: 2 } });
    g = await startGateway(fleet.urls, { ...PASSIVE, outlier: { consecutiveErrors: 3, baseEjectionMs: 1_000, maxEjectionMs: 10_000, forgetAfterMs: 60_000, maxEjectionPercent: 50 } });
  });
  after(async () => {
    await g.close();
    await fleet.close();
  });

  it('ejects a replica after consecutive 5xx from real traffic, for longer each time, and lets it return', async () => {
    const bad = fleet.replicas[0];
    const name = `127.0.0.1:${bad.port}`;
    const r = g.gw.registry.byName(name)!;
    bad.fault({ kind: 'unhealthy' }); // answers 500 quickly: a bad GPU
    const statuses = await hit(g, name, 3, 'a');
    assert.deepEqual(statuses, [500, 500, 500]);
    assert.equal(r.up, false, 'ejected after three 5xx in a row');
    assert.equal(await counterSum(g.gw.metrics.ejections, ['cause', '5xx']), 1);
    assert.ok(g.logs.some((l) => l.level === 40 && l.msg.startsWith('replica ejected') && l.replica === name && l.cause === '5xx'));
    // Nothing lands there while it is out. The ejection can end while a turn is on its way (on a
    // slow machine, ten turns can outlast it): a turn there only counts if it is still out after.
    for (let k = 0; k < 10 && !r.up; k++) {
      const landed = (await turn(g, `b-${k}`)).replica;
      if (landed === name) assert.ok(r.up, `turn ${k} was sent to the ejected replica`);
    }
    const firstMs = r.ejectedUntil - r.lastEjectedAt;
    assert.equal(firstMs, 1_000);

    await waitFor('the ejection to end', () => r.up, 2_000);
    assert.ok(g.logs.some((l) => l.msg.startsWith('replica back') && l.replica === name && l.cause === 'ejection_ended'));
    await hit(g, name, 3, 'c');
    assert.equal(r.up, false, 'ejected again');
    assert.equal(r.ejectedUntil - r.lastEjectedAt, 2_000, 'the second ejection lasts twice as long');
    bad.clearFaults();
    await waitFor('the second ejection to end', () => r.up, 3_000);
    // A success ends the run of failures: two 5xx, a success, then two more 5xx do not eject it
    // (without the success the third 5xx would).
    try {
      bad.fault({ kind: 'unhealthy' });
      assert.deepEqual(await hit(g, name, 2, 'run-1'), [500, 500]);
      bad.clearFaults();
      assert.deepEqual(await hit(g, name, 1, 'between'), [200]);
      bad.fault({ kind: 'unhealthy' });
      assert.deepEqual(await hit(g, name, 2, 'run-2'), [500, 500]);
      assert.equal(r.up, true, 'not ejected: the success broke the run');
      assert.equal(await counterSum(g.gw.metrics.ejections, ['cause', '5xx']), 2);
    } finally {
      bad.clearFaults();
    }
  });

  it('never ejects more than maxEjectionPercent of the fleet; the skipped ejection is counted', async () => {
    for (const sim of fleet.replicas.slice(0, 3)) sim.fault({ kind: 'unhealthy' });
    try {
      // Ejections end after 1–4 s, so on a slow machine one may end before the loop does: watch the
      // count after every turn rather than reading it once at the end.
      let mostOut = 0;
      for (let k = 0; k < 80; k++) {
        await turn(g, `e-${k}`);
        const out = g.gw.registry.replicas.filter((r) => !r.up).length;
        assert.ok(out <= 2, `never more than half of four replicas out (saw ${out})`);
        mostOut = Math.max(mostOut, out);
        if (mostOut === 2 && (await counterSum(g.gw.metrics.ejectionsSkipped)) >= 1) break;
      }
      assert.equal(mostOut, 2, 'half of four replicas, no more');
      assert.ok(await counterSum(g.gw.metrics.ejectionsSkipped) >= 1);
      assert.ok(g.logs.some((l) => l.msg.startsWith('outlier not ejected')));
    } finally {
      for (const sim of fleet.replicas) sim.clearFaults();
    }
  });
});

describe('ejection counts are forgotten after a quiet period', () => {
  let fleet: SimFleet;
  let g: TestGateway;
  before(async () => {
    fleet = await startFleet({ replicas: 2, outputTokens: { min: 2, max: 2 } });
    g = await startGateway(fleet.urls, { ...PASSIVE, outlier: { consecutiveErrors: 2, baseEjectionMs: 200, forgetAfterMs: 600 } });
  });
  after(async () => {
    await g.close();
    await fleet.close();
  });

  it('an ejection long after the last one lasts the base time again', async () => {
    const bad = fleet.replicas[1];
    const name = `127.0.0.1:${bad.port}`;
    const r = g.gw.registry.byName(name)!;
    bad.fault({ kind: 'unhealthy' });
    await hit(g, name, 2, 'f');
    assert.equal(r.ejections, 1);
    await waitFor('return', () => r.up, 1_000);
    await new Promise((res) => setTimeout(res, 700));
    await hit(g, name, 2, 'g');
    assert.equal(r.ejections, 1, 'a quiet period resets the multiplier');
    assert.equal(r.ejectedUntil - r.lastEjectedAt, 200);
  });
});
