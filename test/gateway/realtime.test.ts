// Realtime transcription (/v1/realtime) relayed: checked before it is accepted, one replica for the
// connection's life, frames and closes passed as they are, failures before and after session.created,
// limits, drains, and every slot back at the end.

import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { request } from 'undici';
import { startReplica } from '../../bench/sim/index.js';
import { FAST } from '../sim/helpers.js';
import { accessLines, startGateway, type TestGateway } from '../helpers/gateway.js';
import { dial, rawExchange, refusedWith, type Client } from '../helpers/realtime-client.js';
import { waitFor } from '../helpers/wait.js';
import { sessionCreated, startWsReplica, type WsReplica } from '../helpers/ws-replica.js';

async function metricsText(g: TestGateway): Promise<string> {
  const res = await request(`${g.adminUrl}/metrics`);
  return res.body.text();
}

const series = (text: string, name: string, labels: string) => {
  const m = new RegExp(`^${name}\\{${labels}\\} ([0-9.e+-]+)$`, 'm').exec(text);
  return m === null ? 0 : Number(m[1]);
};

/** Every connection's slots went back: none open, every replica's gauge at 0, every key's count at 0. */
async function released(g: TestGateway, replicas: string[]): Promise<void> {
  await waitFor('every realtime slot back', async () => {
    if (g.gw.realtime.open !== 0) return false;
    const text = await metricsText(g);
    return replicas.every((r) => series(text, 'warmroute_realtime_connections', `replica="${r}"`) === 0) && replicas.every((r) => g.gw.realtime.openOn(r) === 0);
  }, 3_000);
}

const nameOf = (url: string) => url.replace('http://', '');

async function gateway(replicas: string[], raw: Record<string, any> = {}): Promise<TestGateway> {
  const g = await startGateway(replicas, raw);
  await waitFor('replicas up', () => g.gw.registry.replicas.every((r) => r.up && r.models !== null), 5_000);
  return g;
}

describe('realtime relay', () => {
  it('relays frames both ways unchanged and in order, text as text and binary as binary, session.created first', async () => {
    const r = await startWsReplica();
    const g = await gateway([r.url]);
    try {
      const c = await dial(g, { query: '?session_id=call-1' });
      await waitFor('session.created', () => c.got.length === 1);
      assert.match(c.got[0][0].toString(), /^\{"type":"session.created"/);
      const sent: [Buffer, boolean][] = [];
      for (let i = 0; i < 300; i++) {
        const binary = i % 3 === 0;
        const frame = binary ? randomBytes(1 + (i * 37) % 3000) : Buffer.from(JSON.stringify({ type: 'input_audio_buffer.append', audio: randomBytes(1 + (i * 53) % 2000).toString('base64') }));
        sent.push([frame, binary]);
        c.ws.send(frame, { binary });
      }
      await waitFor('every echo', () => c.got.length === 301, 5_000);
      const digest = (xs: [Buffer, boolean][]) => xs.map(([b, bin]) => `${bin}:${createHash('sha1').update(b).digest('hex')}`);
      assert.deepEqual(digest(c.got.slice(1)), digest(sent));
      c.ws.close(1000, 'bye');
      const closed = await c.closed;
      assert.equal(closed.code, 1000);
      await released(g, [nameOf(r.url)]);
      const line = accessLines(g.logs).find((l) => l.path === '/v1/realtime')!;
      assert.equal(line.status, 101);
      assert.equal(line.outcome, 'client');
      assert.equal(line.framesIn, 300);
      assert.equal(line.framesOut, 301);
      assert.equal(line.sessionSource, 'body:session_id');
      assert.equal(line.replica, nameOf(r.url));
    } finally {
      await g.close();
      await r.close();
    }
  });

  it('passes pings, pongs and close codes through both ways', async () => {
    const r = await startWsReplica();
    const g = await gateway([r.url]);
    try {
      const c = await dial(g);
      await waitFor('replica socket', () => r.sockets.length === 1);
      const pong = new Promise<string>((resolve) => c.ws.once('pong', (d) => resolve(d.toString())));
      c.ws.ping('from-client');
      assert.equal(await pong, 'from-client', 'the replica answered the client\'s ping');
      const replicaPong = new Promise<string>((resolve) => r.sockets[0].once('pong', (d) => resolve(d.toString())));
      r.sockets[0].ping('from-replica');
      assert.equal(await replicaPong, 'from-replica', 'the client answered the replica\'s ping');
      const upClosed = new Promise<[number, string]>((resolve) => r.sockets[0].once('close', (code, reason) => resolve([code, reason.toString()])));
      c.ws.close(4000, 'caller hung up');
      assert.deepEqual(await upClosed, [4000, 'caller hung up']);
      await c.closed;

      const d = await dial(g);
      await waitFor('second replica socket', () => r.sockets.length === 2);
      r.sockets[1].close(4001, 'done here');
      const closed = await d.closed;
      assert.deepEqual([closed.code, closed.reason], [4001, 'done here']);
      await released(g, [nameOf(r.url)]);
    } finally {
      await g.close();
      await r.close();
    }
  });

  it('replaces a replica that fails before session.created, and refuses with 502 when none is left', async () => {
    const refusing = await startWsReplica();
    refusing.upgrade = (_req, socket) => socket.end('HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\nconnection: close\r\n\r\n');
    const silent = await startWsReplica();
    silent.connect = (ws) => ws.close(1011, 'engine dead');
    const good = await startWsReplica();
    const g = await gateway([refusing.url, silent.url, good.url], { health: { unhealthyThreshold: 1 } });
    try {
      for (let i = 0; i < 4; i++) {
        const c = await dial(g);
        await waitFor('session.created', () => c.got.length === 1);
        assert.match(c.got[0][0].toString(), /session\.created/);
        c.ws.close();
        await c.closed;
      }
      assert.equal(good.sockets.length, 4, 'every connection ended on the replica that works');
      const text = await metricsText(g);
      assert.ok(series(text, 'warmroute_realtime_replaced_total', `replica="${nameOf(refusing.url)}",cause="status"`) >= 1, text);
      assert.ok(series(text, 'warmroute_realtime_replaced_total', `replica="${nameOf(silent.url)}",cause="closed"`) >= 1);
      assert.ok(g.logs.some((l) => l.level === 40 && /failed before session.created/.test(l.msg)), 'a warn line');

      await good.close();
      await waitFor('the good replica down', () => g.gw.registry.byName(nameOf(good.url))!.up === false, 5_000);
      const refused = await refusedWith(dial(g));
      assert.equal(refused.status, 502);
      assert.equal(refused.body.error.code, 'upstream_unavailable');
      await released(g, [refusing.url, silent.url, good.url].map(nameOf));
    } finally {
      await g.close();
      await Promise.all([refusing.close(), silent.close()]);
    }
  });

  it('a replica lost after session.created: the client gets 1011 with a reason, within a second', async () => {
    const r = await startWsReplica();
    const g = await gateway([r.url]);
    try {
      const c = await dial(g);
      await waitFor('replica socket', () => r.sockets.length === 1);
      const t0 = performance.now();
      r.sockets[0].terminate();
      const closed = await c.closed;
      assert.equal(closed.code, 1011);
      assert.match(closed.reason, /^replica 127\.0\.0\.1:\d+ failed/);
      assert.ok(closed.at - t0 < 1_000, `${closed.at - t0} ms`);
      await released(g, [nameOf(r.url)]);
      assert.equal(accessLines(g.logs).find((l) => l.path === '/v1/realtime')!.outcome, 'replica_failed');
    } finally {
      await g.close();
      await r.close();
    }
  });

  it('checks the upgrade before accepting it: key, path, model, limits', async () => {
    const r = await startWsReplica();
    const key = 'sk-realtime-test';
    const sha256 = createHash('sha256').update(key).digest('hex');
    const g = await gateway([r.url], { auth: { apiKeys: [{ name: 'agent', sha256, maxConcurrent: 2 }] }, realtime: { maxConnections: 3, maxConnectionsPerReplica: 0 } });
    const auth = { authorization: `Bearer ${key}` };
    try {
      assert.equal((await refusedWith(dial(g))).status, 401);
      assert.equal((await refusedWith(dial(g, { headers: { authorization: 'Bearer nope' } }))).status, 401);
      assert.equal((await refusedWith(dial(g, { headers: auth, path: '/v1/realtimes' }))).status, 404);
      const unknown = await refusedWith(dial(g, { headers: auth, query: '?model=no-such-model' }));
      assert.equal(unknown.status, 404);
      assert.equal(unknown.body.error.code, 'model_not_found');
      const h2c = await rawExchange(g.url, 'POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nconnection: upgrade, http2-settings\r\nupgrade: h2c\r\nhttp2-settings: AAMAAABkAARAAAAAAAIAAAAA\r\ncontent-length: 2\r\n\r\n{}');
      assert.match(h2c, /^HTTP\/1.1 400 /);
      assert.match(h2c, /send the request without an Upgrade header/);
      assert.equal(r.upgrades.length, 0, 'nothing refused reached the replica');
      const a = await dial(g, { headers: auth, query: '?model=fixture-model' });
      const b = await dial(g, { headers: auth });
      const overKey = await refusedWith(dial(g, { headers: auth }));
      assert.equal(overKey.status, 429, 'the key holds one slot per open connection');
      a.ws.close();
      b.ws.close();
      await Promise.all([a.closed, b.closed]);
      await released(g, [nameOf(r.url)]);
      const text = await metricsText(g);
      for (const reason of ['unauthorized', 'not_found', 'model_not_found', 'key_limit']) assert.ok(series(text, 'warmroute_realtime_refused_total', `reason="${reason}"`) >= 1, reason);
      assert.equal(accessLines(g.logs).filter((l) => l.path === '/v1/realtime' && l.status === 401).length, 2);
    } finally {
      await g.close();
      await r.close();
    }
  });

  it('refuses past realtime.maxConnections and realtime.maxConnectionsPerReplica with a 503', async () => {
    const r1 = await startWsReplica();
    const r2 = await startWsReplica();
    const g = await gateway([r1.url, r2.url], { realtime: { maxConnections: 3, maxConnectionsPerReplica: 1 } });
    try {
      const a = await dial(g);
      const b = await dial(g);
      assert.deepEqual([g.gw.realtime.openOn(nameOf(r1.url)), g.gw.realtime.openOn(nameOf(r2.url))], [1, 1], 'least connections spreads them');
      const full = await refusedWith(dial(g));
      assert.equal(full.status, 503);
      assert.match(full.body.error.message, /maxConnectionsPerReplica/);
      a.ws.close();
      b.ws.close();
      await Promise.all([a.closed, b.closed]);
      await released(g, [r1.url, r2.url].map(nameOf));
    } finally {
      await g.close();
    }
    const one = await gateway([r1.url, r2.url], { realtime: { maxConnections: 1 } });
    try {
      const a = await dial(one);
      const over = await refusedWith(dial(one));
      assert.equal(over.status, 503);
      assert.equal(over.body.error.code, 'overloaded');
      a.ws.close();
      await a.closed;
      await released(one, [r1.url, r2.url].map(nameOf));
      const text = await metricsText(one);
      assert.equal(series(text, 'warmroute_realtime_refused_total', 'reason="gateway_limit"'), 1);
    } finally {
      await one.close();
      await Promise.all([r1.close(), r2.close()]);
    }
  });
});

describe('realtime relay: endings', () => {
  it('closes an idle connection with 1001 and one with a frame over realtime.maxFrameBytes with 1009', async () => {
    const r = await startWsReplica();
    const g = await gateway([r.url], { realtime: { idleMs: 300, maxFrameBytes: 1024 } });
    try {
      const idle = await dial(g);
      const closed = await idle.closed;
      assert.equal(closed.code, 1001);
      assert.match(closed.reason, /idle for 300 ms/);
      const big = await dial(g);
      await waitFor('replica socket', () => r.sockets.length === 2);
      const upClosed = new Promise<number>((resolve) => r.sockets[1].once('close', (code) => resolve(code)));
      big.ws.send(Buffer.alloc(2000, 'a'));
      assert.equal((await big.closed).code, 1009);
      assert.equal(await upClosed, 1001, 'the replica\'s side closed too');
      await released(g, [nameOf(r.url)]);
      const outcomes = accessLines(g.logs).filter((l) => l.path === '/v1/realtime').map((l) => l.outcome);
      assert.deepEqual(outcomes.sort(), ['frame_too_large', 'idle']);
    } finally {
      await g.close();
      await r.close();
    }
  });

  it('a draining replica keeps its connections until timeouts.drainMs, then closes them with 1012; it gets no new ones', async () => {
    const a = await startWsReplica();
    const b = await startWsReplica();
    const g = await gateway([a.url, b.url], { timeouts: { drainMs: 600 } });
    try {
      const first = await dial(g);
      const on = g.gw.realtime.openOn(nameOf(a.url)) === 1 ? a : b;
      const other = on === a ? b : a;
      const res = await request(`${g.adminUrl}/admin/replicas/${nameOf(on.url)}/drain`, { method: 'POST' });
      await res.body.text();
      assert.ok(res.statusCode >= 200 && res.statusCode < 300, String(res.statusCode));
      for (let i = 0; i < 3; i++) {
        const c = await dial(g);
        assert.equal(g.gw.realtime.openOn(nameOf(other.url)), i + 1, 'new connections go elsewhere');
        c.ws.send('still here?');
        await waitFor('echo', () => c.got.length === 2);
      }
      first.ws.send('still relayed');
      await waitFor('echo on the draining replica', () => first.got.length === 2);
      const closed = await first.closed;
      assert.equal(closed.code, 1012);
      assert.match(closed.reason, /drained/);
    } finally {
      await g.close();
      await Promise.all([a.close(), b.close()]);
    }
  });

  it('a gateway that stops closes its realtime connections with 1001 once its drain time is over', async () => {
    const r = await startWsReplica();
    const g = await gateway([r.url], { timeouts: { drainMs: 200 } });
    try {
      const c = await dial(g);
      const refusedMeanwhile = g.close();
      const closed = await c.closed;
      assert.equal(closed.code, 1001);
      await refusedMeanwhile;
      assert.equal(g.gw.realtime.open, 0);
    } finally {
      await r.close();
    }
  });
});

describe('realtime relay: against the simulator', () => {
  const audio = (ms: number) => Buffer.alloc(16 * ms * 2).toString('base64');

  it('transcribes through the gateway, times each utterance per replica, and pins the session for its next connection', async () => {
    const s1 = await startReplica(FAST, 0);
    const s2 = await startReplica(FAST, 1);
    const g = await gateway([s1.url, s2.url]);
    try {
      const c = await dial(g, { headers: { 'x-session-id': 'call-42' } });
      const events = () => c.got.map(([d]) => JSON.parse(d.toString()) as { type: string });
      const send = (e: object) => c.ws.send(JSON.stringify(e));
      send({ type: 'session.update', model: s1.config.model });
      for (let u = 0; u < 2; u++) {
        send({ type: 'input_audio_buffer.commit' });
        for (let i = 0; i < 6; i++) send({ type: 'input_audio_buffer.append', audio: audio(40) });
        send({ type: 'input_audio_buffer.commit', final: true });
        await waitFor(`utterance ${u}`, () => events().filter((e) => e.type === 'transcription.done').length === u + 1, 10_000);
      }
      assert.ok(events().some((e) => e.type === 'transcription.delta'));
      const replica = [s1, s2].find((s) => s.realtime.open() === 1)!;
      const name = nameOf(replica.url);
      c.ws.close();
      await c.closed;
      await released(g, [s1.url, s2.url].map(nameOf));
      const text = await metricsText(g);
      assert.equal(series(text, 'warmroute_realtime_first_delta_seconds_count', `replica="${name}"`), 2);
      assert.equal(series(text, 'warmroute_realtime_done_seconds_count', `replica="${name}"`), 2);
      const line = accessLines(g.logs).find((l) => l.path === '/v1/realtime')!;
      assert.equal(line.utterances, 2);
      assert.equal(line.route, 'least_connections');

      // Another connection holds the session's replica: the session's next one goes there all the same.
      const holders: Client[] = [];
      for (let i = 0; i < 4 && g.gw.realtime.openOn(name) <= g.gw.realtime.openOn(nameOf((replica === s1 ? s2 : s1).url)); i++) holders.push(await dial(g));
      const again = await dial(g, { query: '?session_id=ignored', headers: { 'x-session-id': 'call-42' } });
      again.ws.close();
      await again.closed;
      for (const h of holders) h.ws.close();
      await waitFor('the pinned line', () => accessLines(g.logs).filter((l) => l.path === '/v1/realtime' && l.session !== undefined).length === 2);
      const pinned = accessLines(g.logs).filter((l) => l.path === '/v1/realtime' && l.session !== undefined)[1];
      assert.equal(pinned.route, 'pinned');
      assert.equal(pinned.replica, name);
      assert.equal(pinned.sessionSource, 'header:x-session-id');
    } finally {
      await g.close();
      await Promise.all([s1.close(), s2.close()]);
    }
  });

  it('a simulated replica that crashes mid-utterance: the client gets 1011 with the replica named', async () => {
    const s = await startReplica(FAST, 0);
    const g = await gateway([s.url]);
    try {
      const c = await dial(g);
      c.ws.send(JSON.stringify({ type: 'session.update', model: s.config.model }));
      c.ws.send(JSON.stringify({ type: 'input_audio_buffer.commit' }));
      c.ws.send(JSON.stringify({ type: 'input_audio_buffer.append', audio: audio(200) }));
      await waitFor('a delta', () => c.got.some(([d]) => d.includes('transcription.delta')), 10_000);
      s.fault({ kind: 'crash' });
      const closed = await c.closed;
      assert.equal(closed.code, 1011);
      assert.match(closed.reason, new RegExp(`replica ${nameOf(s.url).replace(/\./g, '\\.')} failed`));
      await released(g, [nameOf(s.url)]);
    } finally {
      await g.close();
      await s.close();
    }
  });
});
