import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { startReplica, type SimReplica, type SimReplicaOptions } from '../../bench/sim/index.js';
import { simTurn, startGateway, waitForAccess, type TestGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';
import { FAST, postJson } from '../sim/helpers.js';

// What each replica really holds, end to end on real sockets: from the KV events a simulated
// replica publishes, and, where none come, from the cached tokens its responses report.

// 96 blocks of 16 tokens: a ~700-token conversation fits, three more prompts of that size evict it.
const SMALL: SimReplicaOptions = { ...FAST, kvBlocks: 96, maxModelLen: 1536 };
const words = (tag: string, n: number) => Array.from({ length: n }, (_, i) => `${tag}${String(i).padStart(3, '0')}`).join(' ');
const system = { role: 'system', content: words('sys', 320) }; // 2,560 chars ≈ 640 tokens

async function sim(t: TestContext, opts: SimReplicaOptions): Promise<SimReplica> {
  const r = await startReplica(opts);
  t.after(() => r.close());
  return r;
}

async function gateway(t: TestContext, upstreams: Record<string, unknown>[]): Promise<TestGateway> {
  const g = await startGateway([], { upstreams, warmup: { enabled: false } });
  t.after(() => g.close());
  return g;
}

/** Fills the replica's cache with prompts the gateway never saw (another client of the replica). */
async function flood(r: SimReplica): Promise<void> {
  for (let i = 0; i < 4; i++) {
    const res = await postJson(r.url, '/v1/chat/completions', { model: r.config.model, max_tokens: 1, messages: [{ role: 'user', content: words(`flood${i}-`, 320) }] });
    assert.equal(res.status, 200);
  }
}

async function value(g: TestGateway, metric: 'residencyEvictions' | 'kvBlockMapping' | 'kvStreamLive' | 'cachedOverpredicted', labels: Record<string, string>): Promise<number> {
  const { values } = await g.gw.metrics[metric].get();
  return values.filter((v) => Object.entries(labels).every(([k, x]) => (v.labels as Record<string, unknown>)[k] === x)).reduce((s, v) => s + v.value, 0);
}

const believed = (g: TestGateway, replica: string) => g.gw.router.stats().prefixTokensByReplica.get(replica) ?? 0;

test('KV events: what the replica evicts is no longer believed resident; a restart starts it empty', async (t) => {
  const a = await sim(t, { ...SMALL, name: 'a', kvEvents: true });
  const g = await gateway(t, [{ url: a.url, name: 'a', kvEvents: { endpoint: a.kvEvents!.endpoint, replayEndpoint: a.kvEvents!.replayEndpoint } }]);
  // A SUB socket joins a moment after it connects: traffic until the gateway reads a first batch.
  await waitFor('the stream live', async () => {
    await postJson(a.url, '/v1/chat/completions', { model: a.config.model, max_tokens: 1, messages: [{ role: 'user', content: words('hello', 20) }] });
    return (await value(g, 'kvStreamLive', { replica: 'a' })) === 1;
  }, 5000);
  const turn1 = [system, { role: 'user', content: words('u1-', 20) }];
  assert.equal((await simTurn(g, turn1, { session: 's1' })).status, 200);
  await waitFor('the request mapped to its engine blocks', async () => (await value(g, 'kvBlockMapping', { replica: 'a', outcome: 'learned' })) === 1);
  assert.ok(believed(g, 'a') > 600);
  assert.ok((g.gw.router.stats().kvBlocksByReplica.get('a')?.links ?? 0) > 0, 'links matched to engine blocks: exact');
  assert.equal(g.gw.router.stats().retentionByReplica.get('a'), 600_000, 'the links never matched keep the TTL');

  await flood(a);
  await waitFor('the eviction seen', async () => (await value(g, 'residencyEvictions', { replica: 'a', source: 'events' })) > 0 && believed(g, 'a') === 0);

  // Believed again after the next turn; then the engine restarts: its new stream starts from 0.
  assert.equal((await simTurn(g, turn1, { session: 's1' })).status, 200);
  await waitFor('recorded again', () => believed(g, 'a') > 0);
  a.fault({ kind: 'restart' });
  await postJson(a.url, '/v1/chat/completions', { model: a.config.model, max_tokens: 1, messages: [{ role: 'user', content: words('again', 40) }] });
  await waitFor('the restart seen in the stream', async () => {
    const { values } = await g.gw.metrics.kvStreamChanges.get();
    return values.some((v) => v.labels.state === 'restarted' && v.value > 0) && believed(g, 'a') === 0;
  });
});

test('no KV events: a response with fewer cached tokens than predicted lowers retention and forgets what is lost', async (t) => {
  const a = await sim(t, { ...SMALL, name: 'a' });
  const g = await gateway(t, [{ url: a.url, name: 'a' }]);
  const u1 = { role: 'user', content: words('u1-', 20) };
  const r1 = await simTurn(g, [system, u1], { session: 's1' });
  assert.equal(r1.status, 200);
  // Control: a follow-up right away is served warm, as predicted.
  const turn2 = [system, u1, { role: 'assistant', content: 'ok' }, { role: 'user', content: words('u2-', 10) }];
  await simTurn(g, turn2, { session: 's1' });
  await waitForAccess(g, (l) => l.length >= 2);
  assert.equal(await value(g, 'residencyEvictions', { replica: 'a', source: 'feedback' }), 0);
  assert.equal(g.gw.router.stats().retentionByReplica.get('a'), 600_000);

  await flood(a);
  const turn3 = [...turn2, { role: 'assistant', content: 'ok' }, { role: 'user', content: words('u3-', 10) }];
  await simTurn(g, turn3, { session: 's1' });
  const lines = await waitForAccess(g, (l) => l.length >= 3);
  assert.ok(lines[2].cachedTokens < 100, `the replica evicted: ${lines[2].cachedTokens} cached`);
  await waitFor('the feedback', async () => (await value(g, 'residencyEvictions', { replica: 'a', source: 'feedback' })) === 1);
  assert.ok((g.gw.router.stats().retentionByReplica.get('a') as number) < 600_000, 'retention lowered to the lost prefix\'s age');
  assert.ok((await value(g, 'cachedOverpredicted', { replica: 'a' })) > 500);
});
