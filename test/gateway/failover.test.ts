import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { request } from 'undici';
import { startFixture, type FixtureUpstream } from '../helpers/fixture-upstream.js';
import { accessLines, chatBody, startGateway, type TestGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';

const post = (g: TestGateway, headers: Record<string, string>, body = chatBody()) =>
  request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });

async function turn(g: TestGateway, session: string): Promise<{ replica: string; route: string; status: number }> {
  const res = await post(g, { 'x-session-id': session });
  await res.body.text();
  return { replica: String(res.headers['x-warmroute-replica']), route: String(res.headers['x-warmroute-route']), status: res.statusCode };
}

describe('sessions, failover and aborts', () => {
  let ups: FixtureUpstream[];
  let g: TestGateway;
  before(async () => {
    ups = await Promise.all(['a', 'b', 'c'].map((n) => startFixture(n)));
    g = await startGateway(ups.map((u) => u.url));
  });
  after(async () => {
    await g.close();
    await Promise.all(ups.map((u) => u.close()));
  });

  it('pins many interleaved sessions: every turn of a session lands on one replica', async () => {
    const sessions = Array.from({ length: 30 }, (_, i) => `sess-${i}`);
    const where = new Map<string, Set<string>>();
    for (let round = 0; round < 4; round++) {
      const results = await Promise.all(sessions.map(async (s) => ({ s, r: await turn(g, s) })));
      for (const { s, r } of results) {
        assert.equal(r.status, 200);
        if (round > 0) assert.equal(r.route, 'pinned');
        if (!where.has(s)) where.set(s, new Set());
        where.get(s)!.add(r.replica);
      }
    }
    for (const [s, replicas] of where) assert.equal(replicas.size, 1, `${s} moved: ${[...replicas]}`);
    const used = new Set([...where.values()].map((x) => [...x][0]));
    assert.equal(used.size, 3, 'sessions should spread over all replicas');
    const metrics = await (await request(`${g.adminUrl}/metrics`)).body.text();
    const pinned = [...metrics.matchAll(/warmroute_sessions_pinned\{replica="[^"]+"\} (\d+)/g)].reduce((sum, m) => sum + Number(m[1]), 0);
    assert.equal(pinned, 30);
    assert.match(metrics, /warmroute_prefix_index_entries [1-9]\d*/);
    const admin = (await (await request(`${g.adminUrl}/admin/sessions/sess-3`)).body.json()) as { replica: string; warmTokens: number };
    assert.equal(admin.replica, [...where.get('sess-3')!][0]);
    assert.ok(admin.warmTokens > 0);
    const del = await request(`${g.adminUrl}/admin/sessions/sess-3`, { method: 'DELETE' });
    assert.deepEqual(await del.body.json(), { unpinned: true });
    const gone = await request(`${g.adminUrl}/admin/sessions/sess-3`);
    assert.equal(gone.statusCode, 404);
    assert.equal(((await gone.body.json()) as { error: { code: string } }).error.code, 'session_not_found');
    assert.equal((await turn(g, 'sess-3')).route, 'placed', 'after DELETE the session is placed afresh');
  });

  it('aborts the upstream request as soon as the client goes away, not when the answer ends', async () => {
    const target = await turn(g, 'abort-me');
    const up = ups.find((u) => target.replica.endsWith(`:${u.port}`))!;
    const abortsBefore = up.aborts.length;
    // 200 chunks 50 ms apart: the replica would go on for 10 s. It counts an abort only for a
    // response cut before its end, so one within 5 s can only be the client's going away passed on
    // (a gateway that read the answer to its end would show none). How many milliseconds that takes
    // is the machine's speed, not the gateway's behaviour.
    const res = await post(g, { 'x-session-id': 'abort-me', 'x-fixture-chunks': '200', 'x-fixture-gap-ms': '50' }).catch(() => null);
    assert.ok(res);
    const it = res!.body[Symbol.asyncIterator]();
    await it.next();
    res!.body.destroy();
    await waitFor('the replica to see the abort', () => up.aborts.length > abortsBefore, 5_000);
    assert.equal(up.aborts.length, abortsBefore + 1);
  });

  it('retries on the next replica when one answers 503 before any byte, and counts it', async () => {
    // The fixture answers 503 to every attempt carrying the header, so all attempts fail: the
    // client sees the last replica's 503 after maxRetries (2) retries.
    const res = await post(g, { 'x-session-id': 'busy', 'x-fixture-status': '503' });
    assert.equal(res.statusCode, 503);
    await res.body.text();
    assert.equal(res.headers['x-warmroute-route'], 'failover');
    const metrics = await (await request(`${g.adminUrl}/metrics`)).body.text();
    const retries = [...metrics.matchAll(/warmroute_upstream_retries_total\{replica="[^"]+",cause="status_503"\} (\d+)/g)].reduce((s, m) => s + Number(m[1]), 0);
    assert.equal(retries, 2);
  });

  it('ends a stream that dies mid-way with one error event, and the openai client raises', async () => {
    const res = await post(g, { 'x-session-id': 'dies', 'x-fixture-chunks': '5', 'x-fixture-die-after': '2', 'x-fixture-gap-ms': '10' });
    const text = await res.body.text();
    assert.equal(res.statusCode, 200);
    assert.ok(text.includes('tok1'));
    assert.ok(!text.includes('[DONE]'));
    const events = text.split('\n\n').filter((e) => e.startsWith('data: {"error"'));
    assert.equal(events.length, 1);
    const err = JSON.parse(events[0].slice(6)).error;
    assert.equal(err.code, 'upstream_stream_error');
    assert.match(err.message, /^Replica 127\.0\.0\.1:\d+ failed mid-stream/);

    const client = new OpenAI({ baseURL: `${g.url}/v1`, apiKey: 'x', maxRetries: 0, defaultHeaders: { 'x-fixture-die-after': '2', 'x-fixture-chunks': '5', 'x-fixture-gap-ms': '10' } });
    const stream = await client.chat.completions.create({ model: 'fixture-model', stream: true, messages: [{ role: 'user', content: 'x' }] });
    await assert.rejects(async () => { for await (const _ of stream) { /* consume */ } }, /failed mid-stream/);
  });

  it('moves the sessions of a killed replica to their next choice; later turns succeed; it comes back after a probe', async () => {
    const sessions = Array.from({ length: 12 }, (_, i) => `kill-${i}`);
    const first = new Map<string, string>();
    for (const s of sessions) first.set(s, (await turn(g, s)).replica);
    const victim = ups[0];
    const victimName = `127.0.0.1:${victim.port}`;
    const onVictim = sessions.filter((s) => first.get(s) === victimName);
    assert.ok(onVictim.length > 0, 'no session landed on the victim');
    await victim.close();
    for (const s of sessions) {
      const r = await turn(g, s);
      assert.equal(r.status, 200, `${s} failed after the kill`);
      if (onVictim.includes(s)) assert.notEqual(r.replica, victimName);
      else assert.equal(r.replica, first.get(s), `${s} moved although its replica is alive`);
    }
    const replicas = (await (await request(`${g.adminUrl}/admin/replicas`)).body.json()) as { replicas: { name: string; state: string; lastError: string; ejection: { ejections: number; until: string | null; lastAt: string | null } }[] };
    const v = replicas.replicas.find((r) => r.name === victimName)!;
    // Its ejection history, not its state: an ejection lasts only baseEjectionMs (300 ms here), and
    // on a slow machine the turns above can outlast it (it is then down by its checks, or briefly up).
    assert.ok(v.ejection.ejections >= 1 && v.ejection.lastAt !== null, `a refused connection ejects it (outlier detection): ${JSON.stringify(v)}`);
    // Read in the same answer as its ejection's end: while that is still ahead, the state says so.
    if (v.ejection.until !== null) assert.equal(v.state, 'ejected');
    const ejected = [...(await (await request(`${g.adminUrl}/metrics`)).body.text()).matchAll(/^warmroute_replica_ejections_total\{replica="([^"]+)",cause="connect"\} (\d+)$/gm)];
    assert.ok(ejected.some(([, name, n]) => name === victimName && Number(n) >= 1), `ejected for the refused connections: ${ejected.map((m) => m[0])}`);
    assert.match(v.lastError, /connect/);
    // Later turns stay where they moved (re-pinned), and stay successful.
    const moved = await turn(g, onVictim[0]);
    assert.equal(moved.route, 'pinned');
    // Bring it back on the same port: the active probe marks it up after the backoff. That takes
    // the rest of its ejection (each one longer) and two passed checks: bounded, but generously.
    const revived = await startFixtureOnPort(victim.port);
    try {
      const deadline = Date.now() + 10_000;
      let state = 'down';
      while (state !== 'up' && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 100));
        const body = (await (await request(`${g.adminUrl}/admin/replicas`)).body.json()) as { replicas: { name: string; state: string }[] };
        state = body.replicas.find((r) => r.name === victimName)!.state;
      }
      assert.equal(state, 'up');
    } finally {
      await revived.close();
    }
    const lines = accessLines(g.logs).filter((l) => l.route === 'failover');
    assert.ok(lines.length >= 1);
  });
});

async function startFixtureOnPort(port: number): Promise<{ close(): Promise<void> }> {
  const { createServer } = await import('node:http');
  const server = createServer((req, res) => {
    if (req.url === '/health') return res.end();
    if (req.url === '/v1/models') return res.end('{"object":"list","data":[{"id":"fixture-model"}]}');
    res.statusCode = 404;
    res.end();
  });
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
  return { close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }) };
}
