import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { startFixture } from '../helpers/fixture-upstream.js';
import { chatBody, startGateway, waitForAccess, type TestGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';

const JSON_HEADERS = { 'content-type': 'application/json' };
// Held at the replica until the test releases it: a stream that lasted a fixed time could end, and
// free its slot, before a slow machine got the next request in.
const held = (name: string) => ({ 'x-fixture-hold': name });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const chat = (g: TestGateway, extra: Record<string, string> = {}) =>
  request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: { ...JSON_HEADERS, ...extra }, body: chatBody() });

/** The value of the one series `re` matches; a missing series throws (a renamed metric is not a 0). */
async function metric(g: TestGateway, re: RegExp): Promise<number> {
  const text = await (await request(`${g.adminUrl}/metrics`)).body.text();
  const m = re.exec(text);
  if (!m) throw new Error(`no series matches ${re}`);
  return Number(m[1]);
}

/** Waits until the series reads `want`; throws if it never does. */
async function untilMetric(g: TestGateway, re: RegExp, want: number, ms = 3000): Promise<void> {
  await waitFor(`${re} to read ${want}`, async () => (await metric(g, re)) === want, ms);
}

describe('load shedding: bounded limits and queues, refusals counted by reason', () => {
  it('gateway-wide: past the limit requests wait (the queue hop); past the queue, 503 with Retry-After', async () => {
    const a = await startFixture('a');
    const g = await startGateway([a.url], { limits: { maxConcurrent: 2, maxQueued: 1 }, timeouts: { queueMs: 5000 } });
    try {
      const holding = [chat(g, held('global')), chat(g, held('global'))];
      await untilMetric(g, /warmroute_global_inflight (\d+)/, 2);
      const queued = chat(g, { 'x-session-id': 'queued' });
      await untilMetric(g, /warmroute_global_queued (\d+)/, 1);
      const refused = await chat(g);
      assert.equal(refused.statusCode, 503);
      assert.equal(refused.headers['retry-after'], '5');
      assert.equal(((await refused.body.json()) as { error: { code: string } }).error.code, 'overloaded');
      // The queued request waits at least this long, however fast or slow the machine.
      await sleep(300);
      a.release('global');
      for (const r of await Promise.all(holding)) await r.body.text();
      const q = await queued;
      assert.equal(q.statusCode, 200);
      await q.body.text();
      const isQueued = (l: Record<string, any>) => l.session !== undefined && l.sessionSource === 'header:x-session-id';
      const line = (await waitForAccess(g, (ls) => ls.some(isQueued))).find(isQueued)!;
      assert.ok(line.queueMs >= 300, `the wait shows as the queue hop: ${line.queueMs} ms`);
      assert.equal(await metric(g, /warmroute_shed_total\{reason="global_queue_full"\} (\d+)/), 1);
      assert.equal(await metric(g, /warmroute_global_inflight (\d+)/), 0);
    } finally {
      a.release('global'); // else a failed assertion leaves close() draining a held stream
      await g.close();
      await a.close();
    }
  });

  it('gateway-wide: a wait longer than timeouts.queueMs is a 503 queue_timeout', async () => {
    const a = await startFixture('a');
    const g = await startGateway([a.url], { limits: { maxConcurrent: 1, maxQueued: 4 }, timeouts: { queueMs: 150 } });
    try {
      const holding = chat(g, held('timeout'));
      await untilMetric(g, /warmroute_global_inflight (\d+)/, 1);
      const late = await chat(g);
      assert.equal(late.statusCode, 503);
      assert.equal(late.headers['retry-after'], '1');
      assert.equal(((await late.body.json()) as { error: { code: string } }).error.code, 'queue_timeout');
      a.release('timeout');
      await (await holding).body.text();
      assert.equal(await metric(g, /warmroute_shed_total\{reason="global_queue_timeout"\} (\d+)/), 1);
      assert.equal(await metric(g, /warmroute_global_queued (\d+)/), 0);
    } finally {
      a.release('timeout');
      await g.close();
      await a.close();
    }
  });

  it('per replica: past its limit and its queue, the next replica takes it; with none left, 503', async () => {
    const a = await startFixture('a');
    const b = await startFixture('b');
    const g = await startGateway([a.url, b.url], { limits: { maxInflightPerReplica: 1, maxQueuedPerReplica: 1 }, timeouts: { queueMs: 5000 } });
    try {
      // One session pinned to one replica, so its turns all ask for the same one.
      const first = await chat(g, { 'x-session-id': 's' });
      const home = String(first.headers['x-warmroute-replica']);
      await first.body.text();
      const holding = chat(g, { 'x-session-id': 's', ...held('replica') });
      await untilMetric(g, new RegExp(`warmroute_inflight\\{replica="${home.replace(/\./g, '\\.')}"\\} (\\d+)`), 1);
      const waiting = chat(g, { 'x-session-id': 's' });
      await untilMetric(g, new RegExp(`warmroute_queued\\{replica="${home.replace(/\./g, '\\.')}"\\} (\\d+)`), 1);
      const spilled = await chat(g, { 'x-session-id': 's' });
      assert.equal(spilled.statusCode, 200);
      assert.notEqual(String(spilled.headers['x-warmroute-replica']), home, 'a full queue sends it to the next replica');
      assert.equal(spilled.headers['x-warmroute-route'], 'failover');
      await spilled.body.text();
      for (const f of [a, b]) f.release('replica');
      for (const r of await Promise.all([holding, waiting])) {
        assert.equal(r.statusCode, 200);
        await r.body.text();
      }
      assert.equal(await metric(g, /warmroute_shed_total\{reason="replica_queue_full"\} (\d+)/), 1);
    } finally {
      for (const f of [a, b]) f.release('replica');
      await g.close();
      await a.close();
      await b.close();
    }
    const only = await startFixture('only');
    const g1 = await startGateway([only.url], { limits: { maxInflightPerReplica: 1, maxQueuedPerReplica: 0 } });
    try {
      const holding = chat(g1, held('only'));
      await untilMetric(g1, /warmroute_inflight\{replica="[^"]+"\} (\d+)/, 1);
      const refused = await chat(g1);
      assert.equal(refused.statusCode, 503);
      assert.ok(refused.headers['retry-after']);
      assert.equal(((await refused.body.json()) as { error: { code: string } }).error.code, 'overloaded');
      only.release('only');
      await (await holding).body.text();
    } finally {
      only.release('only');
      await g1.close();
      await only.close();
    }
  });
});
