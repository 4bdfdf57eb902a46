/**
 * The defects a review of the request path found, each as a test against real sockets: a replica
 * that sends ambiguous framing or resets mid-body, a client that chunks its body byte by byte or
 * sends an absolute-form target, bodies nested 20,000 deep, prompt text in logs, a stream that dies
 * mid-way, replicas over TLS, and credentials that could inject headers.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer as createHttpsServer } from 'node:https';
import { connect, createServer as createTcpServer, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { Client, request } from 'undici';
import { ConfigError, resolveConfig } from '../../src/config/load.js';
import { startFixture, type FixtureUpstream } from '../helpers/fixture-upstream.js';
import { accessLines, chatBody, startGateway, waitForAccess, type TestGateway } from '../helpers/gateway.js';
import { rawExchange } from '../helpers/raw-exchange.js';
import { contentEvent, rawResponse, startRawReplica, type RawReplica } from '../helpers/raw-replica.js';

const JSON_HEADERS = { 'content-type': 'application/json' };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('defect 1: ambiguous framing from a replica is a 502, never forwarded', () => {
  let replica: RawReplica;
  let g: TestGateway;
  before(async () => {
    replica = await startRawReplica((req) => {
      if (req.headers['x-honest'] !== undefined) {
        req.socket.write(rawResponse(200, [['content-type', 'application/json'], ['content-length', '11']], '{"ok":true}'));
        return;
      }
      // Content-Length: 0 and chunked, the chunk holding a whole second response.
      const injected = rawResponse(200, [['content-type', 'application/json'], ['content-length', '12']], '{"pwned":1}\n');
      req.socket.write(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nContent-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n${injected.length.toString(16)}\r\n${injected}\r\n0\r\n\r\n`);
    });
    g = await startGateway([replica.url]);
  });
  after(async () => { await g.close(); await replica.close(); });

  it('the client gets a 502, and its next request on the same connection gets its own answer', async () => {
    const client = new Client(g.url, { pipelining: 1 });
    try {
      const first = await client.request({ path: '/v1/chat/completions', method: 'POST', headers: JSON_HEADERS, body: chatBody({ stream: false }) });
      const text = await first.body.text();
      assert.equal(first.statusCode, 502);
      assert.equal(JSON.parse(text).error.code, 'upstream_unavailable');
      assert.ok(!text.includes('pwned'));
      const second = await client.request({ path: '/v1/chat/completions', method: 'POST', headers: { ...JSON_HEADERS, 'x-honest': '1' }, body: chatBody({ stream: false }) });
      assert.equal(second.statusCode, 200);
      assert.equal(await second.body.text(), '{"ok":true}');
    } finally {
      await client.close();
    }
    const line = (await waitForAccess(g, (ls) => ls.some((l) => l.status === 502))).find((l) => l.status === 502)!;
    assert.equal(line.err, 'upstream_unavailable');
    assert.match(line.upstreamError, /Transfer-Encoding can't be present with Content-Length/);
  });
});

describe('defect 2: a body chunked one byte at a time costs memory in proportion to its size', () => {
  /** Sends a chat body chunked one byte per chunk over a raw socket; the gateway's answer. */
  const upload = (port: number, json: string) => new Promise<string>((resolve, reject) => {
    const s = connect(port, '127.0.0.1');
    let got = '';
    s.on('data', (d) => { got += d.toString(); if (got.includes('"object":"chat.completion"')) s.end(); });
    s.on('close', () => resolve(got));
    s.on('error', reject);
    s.write('POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n');
    // 64 KiB of wire per write: each body byte is its own chunk.
    const perWrite = 64 * 1024 / 6;
    let i = 0;
    const pump = () => {
      while (i < json.length) {
        let piece = '';
        const end = Math.min(json.length, i + perWrite);
        for (; i < end; i++) piece += `1\r\n${json[i]}\r\n`;
        if (!s.write(piece)) return void s.once('drain', pump);
      }
      s.write('0\r\n\r\n');
    };
    pump();
  });
  const body = (bytes: number) => JSON.stringify({ model: 'fixture-model', stream: false, messages: [{ role: 'user', content: 'x'.repeat(bytes) }] });

  it('1 MiB sent as 1-byte chunks: the gateway process peaks under 64 MB above where it started (the old path: +409 MB)', async () => {
    const up = await startFixture('tiny');
    // No periodic probes: on a busy machine one slow /health would take the only replica out.
    const dir = mkdtempSync(join(tmpdir(), 'warmroute-chunks-'));
    writeFileSync(join(dir, 'c.yaml'), 'health: { probeIntervalMs: 600000, statsIntervalMs: 0 }\n');
    const { spawnGateway } = await import('../helpers/spawn-gateway.js');
    const gw = await spawnGateway([up.url], ['--config', join(dir, 'c.yaml')]);
    try {
      // A small one first, so what the first request costs anyway (code compiled, buffers made) is
      // in the baseline.
      assert.match(await upload(gw.port, body(16 * 1024)), /^HTTP\/1.1 200/);
      const rssBefore = gw.memory().rssKb;
      const json = body(1024 * 1024);
      assert.match(await upload(gw.port, json), /^HTTP\/1.1 200/);
      const seen = up.seen.filter((r) => r.url === '/v1/chat/completions').at(-1)!;
      assert.equal(seen.body.toString(), json, 'the replica got the body byte for byte');
      const peakKb = gw.memory().hwmKb;
      assert.ok(peakKb - rssBefore < 64 * 1024, `peak RSS grew by ${Math.round((peakKb - rssBefore) / 1024)} MB for a 1 MiB body`);
    } finally {
      await gw.stop();
      await up.close();
    }
  });
});

describe('defects 3–7 against a fixture replica', () => {
  let a: FixtureUpstream;
  let b: FixtureUpstream;
  let g: TestGateway;
  before(async () => {
    a = await startFixture('a');
    b = await startFixture('b');
    g = await startGateway([a.url, b.url], { logging: { level: 'trace' } });
  });
  after(async () => { await g.close(); await a.close(); await b.close(); });
  const port = () => Number(new URL(g.url).port);

  it('defect 3: an absolute-form target is validated, identified and routed like any other', async () => {
    const bad = JSON.stringify({ model: 'fixture-model', messages: 'not a list' });
    const refused = await rawExchange(port(), `POST http://127.0.0.1:${port()}/v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${bad.length}\r\nconnection: close\r\n\r\n${bad}`);
    assert.match(refused, /^HTTP\/1.1 400/);
    assert.match(refused, /"param":"messages"/);
    const good = chatBody({ stream: false });
    const from = [a.seen.length, b.seen.length];
    const answered = await rawExchange(port(), `POST http://127.0.0.1:${port()}/v1/chat/completions?x=1 HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nx-session-id: absolute-1\r\ncontent-length: ${good.length}\r\nconnection: close\r\n\r\n${good}`);
    assert.match(answered, /^HTTP\/1.1 200/);
    assert.match(answered, /x-warmroute-route: placed/);
    const forwarded = [...a.seen.slice(from[0]), ...b.seen.slice(from[1])].find((r) => r.url.includes('completions'))!;
    assert.equal(forwarded.url, '/v1/chat/completions?x=1', 'the replica gets the origin-form target');
    assert.ok(g.gw.router.session('absolute-1'), 'the session key was read and pinned');
  });

  it('defect 5: 20,000 nested arrays in a message or in tools are a 400 naming the limit', async () => {
    const deep = '['.repeat(20_000) + ']'.repeat(20_000);
    for (const body of [
      `{"model":"fixture-model","messages":[{"role":"user","content":${deep}}]}`,
      `{"model":"fixture-model","messages":[{"role":"user","content":"hi"}],"tools":${deep}}`,
    ]) {
      const res = await request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: JSON_HEADERS, body });
      const err = ((await res.body.json()) as { error: { code: string; message: string } }).error;
      assert.equal(res.statusCode, 400);
      assert.equal(err.code, 'nesting_too_deep');
      assert.match(err.message, /128 levels/);
    }
    const ok = await request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: JSON_HEADERS, body: chatBody({ stream: false }) });
    assert.equal(ok.statusCode, 200);
    await ok.body.text();
  });

  it('defect 6: a malformed body never puts prompt text in any log line, at any level', async () => {
    const from = g.logs.length;
    const logged = accessLines(g.logs).length;
    const res = await request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: JSON_HEADERS, body: '{"messages":[{"role":"user","content":"my secret diagnosis is gout" oops]}' });
    assert.equal(res.statusCode, 400);
    const answer = ((await res.body.json()) as { error: { code: string; message: string } }).error;
    assert.equal(answer.code, 'invalid_json');
    assert.doesNotMatch(answer.message, /diagnosis/);
    const res2 = await request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: JSON_HEADERS, body: '{"model":"my secret diagnosis is gout", "messages": [{"role":"user","content":"hi"}]}' });
    assert.equal(res2.statusCode, 404);
    await res2.body.text();
    // Both requests' access lines written: everything they log is in by then.
    await waitForAccess(g, (ls) => ls.length >= logged + 2);
    const text = JSON.stringify(g.logs.slice(from));
    assert.ok(g.logs.length > from);
    assert.doesNotMatch(text, /diagnosis/);
  });

  it('defect 7: a stream that died mid-way is an "interrupted" outcome, and the next turn fails over', async () => {
    const turn = async (extra: Record<string, string> = {}) => {
      const res = await request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: { ...JSON_HEADERS, 'x-session-id': 'dies-7', ...extra }, body: chatBody() });
      const text = await res.body.text();
      return { replica: String(res.headers['x-warmroute-replica']), route: String(res.headers['x-warmroute-route']), text };
    };
    const first = await turn();
    assert.equal(first.route, 'placed');
    const logged = accessLines(g.logs).length;
    const broken = await turn({ 'x-fixture-chunks': '5', 'x-fixture-die-after': '2', 'x-fixture-gap-ms': '10' });
    assert.equal(broken.route, 'pinned');
    assert.equal(broken.replica, first.replica);
    assert.match(broken.text, /"code":"upstream_stream_error"/);
    const line = (await waitForAccess(g, (ls) => ls.length > logged)).filter((l) => l.session !== undefined).at(-1)!;
    assert.equal(line.outcome, 'interrupted');
    const metrics = await (await request(`${g.adminUrl}/metrics`)).body.text();
    assert.match(metrics, new RegExp(`warmroute_requests_total\\{replica="${first.replica.replace(/\./g, '\\.')}",route="pinned",code="interrupted"\\} 1`));
    const next = await turn();
    assert.equal(next.route, 'failover');
    assert.notEqual(next.replica, first.replica);
    assert.equal((await turn()).route, 'pinned');
  });
});

describe('defect 4: an event stream the replica framed with a Content-Length', () => {
  let replica: RawReplica;
  let g: TestGateway;
  before(async () => {
    replica = await startRawReplica((req) => {
      req.socket.write(rawResponse(200, [['content-type', 'text/event-stream'], ['content-length', '5000']], contentEvent('Hello')));
      setTimeout(() => req.socket.end(), 20);
    });
    g = await startGateway([replica.url]);
  });
  after(async () => { await g.close(); await replica.close(); });

  // A hang would never end the body: the test's own timeout is what fails it.
  it('ends at once with one error event, on a keep-alive connection, instead of hanging', { timeout: 5_000 }, async () => {
    const client = new Client(g.url);
    try {
      const res = await client.request({ path: '/v1/chat/completions', method: 'POST', headers: JSON_HEADERS, body: chatBody() });
      assert.equal(res.headers['content-length'], undefined, 'an event stream is relayed chunked');
      const text = await res.body.text();
      assert.match(text, /Hello/);
      assert.equal(text.split('\n\n').filter((e) => e.startsWith('data: {"error"')).length, 1);
    } finally {
      await client.close();
    }
  });
});

describe('defect 8: the upstream edge cases', () => {
  it('a POST is never sent twice to a replica that closed the connection without answering', async () => {
    let completions = 0;
    const replica = await startRawReplica((req) => {
      completions++;
      // The second request (on a kept-alive connection): read, then the connection closed 300 ms later.
      if (completions > 1) setTimeout(() => req.socket.end(), 300);
      else req.socket.write(rawResponse(200, [['content-type', 'application/json'], ['content-length', '2']], '{}'));
    });
    const g = await startGateway([replica.url]);
    try {
      const post = () => request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: JSON_HEADERS, body: chatBody({ stream: false }) });
      const ok = await post();
      assert.equal(ok.statusCode, 200);
      await ok.body.text();
      const lost = await post();
      assert.equal(lost.statusCode, 502);
      await lost.body.text();
      await sleep(100);
      assert.equal(completions, 2, 'the replica saw the second request again');
    } finally {
      await g.close();
      await replica.close();
    }
  });

  it('a close-delimited body cut by a reset is an interrupted stream, not a complete one', async () => {
    const replica = await startRawReplica((req) => {
      req.socket.write(rawResponse(200, [['content-type', 'text/event-stream']], contentEvent('Hello')));
      setTimeout(() => req.socket.resetAndDestroy(), 30);
    });
    const g = await startGateway([replica.url]);
    try {
      const res = await request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: JSON_HEADERS, body: chatBody() });
      const text = await res.body.text();
      assert.match(text, /Hello/);
      assert.match(text, /"code":"upstream_stream_error"/);
      assert.equal((await waitForAccess(g, (ls) => ls.length > 0)).at(-1)!.outcome, 'interrupted');
    } finally {
      await g.close();
      await replica.close();
    }
  });

  it('https replicas: the CA file from config is used; without it the certificate is refused', async () => {
    const tls = await startTlsFixture();
    try {
      const trusted = await startGateway([], { upstreams: [{ url: tls.url, tls: { caFile: 'test/fixtures/tls/ca.pem' } }] });
      try {
        const res = await request(`${trusted.url}/v1/chat/completions`, { method: 'POST', headers: JSON_HEADERS, body: chatBody({ stream: false }) });
        assert.equal(res.statusCode, 200);
        assert.match(await res.body.text(), /tls-ok/);
      } finally {
        await trusted.close();
      }
      const untrusted = await startGateway([tls.url]);
      try {
        const res = await request(`${untrusted.url}/v1/chat/completions`, { method: 'POST', headers: JSON_HEADERS, body: chatBody({ stream: false }) });
        assert.ok(res.statusCode === 502 || res.statusCode === 503, `status ${res.statusCode}`);
        await res.body.text();
      } finally {
        await untrusted.close();
      }
    } finally {
      await tls.close();
    }
  });

  it('an https replica added by a config reload connects with its CA file', async () => {
    const tls = await startTlsFixture();
    // Starts with a replica nothing listens on; the reload swaps in the https one.
    const g = await startGateway(['http://127.0.0.1:1']);
    try {
      g.gw.reconfigure(resolveConfig({ upstreams: [{ url: tls.url, tls: { caFile: 'test/fixtures/tls/ca.pem' } }], health: { probeIntervalMs: 200 } }));
      const deadline = Date.now() + 5_000;
      let status = 0;
      while (Date.now() < deadline) {
        const res = await request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: JSON_HEADERS, body: chatBody({ stream: false }) });
        const text = await res.body.text();
        status = res.statusCode;
        if (status === 200) {
          assert.match(text, /tls-ok/);
          break;
        }
        await sleep(50);
      }
      assert.equal(status, 200, 'the added https replica was reached with the CA from its config');
    } finally {
      await g.close();
      await tls.close();
    }
  });

  it('a replica whose TLS handshake stalls is failed over within the connect timeout, not a 504', async () => {
    const tls = await startTlsFixture();
    // A TCP front for the https replica: healthy while piping, then it accepts connections and
    // never speaks, after dropping the ones it had.
    const front = await startStallableFront(tls.port);
    const good = await startFixture('good');
    const g = await startGateway([], {
      upstreams: [{ url: `https://127.0.0.1:${front.port}`, tls: { caFile: 'test/fixtures/tls/ca.pem' } }, { url: good.url }],
      routing: { strategy: 'round-robin' },
      // Also the good replica's limit: short enough to fail over long before a 504, long enough
      // that a busy machine still connects to a healthy replica on loopback in time.
      timeouts: { connectMs: 1_000 },
      health: { probeIntervalMs: 60_000 },
    });
    try {
      front.stall();
      // A 200 from the good replica and one connect_timeout retry are the failover; a handshake
      // left to stall would end in a 504 instead.
      for (let i = 0; i < 2; i++) {
        const res = await request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: JSON_HEADERS, body: chatBody({ stream: false }) });
        assert.equal(res.statusCode, 200);
        await res.body.text();
      }
      const metrics = await (await request(`${g.adminUrl}/metrics`)).body.text();
      assert.match(metrics, /warmroute_upstream_retries_total\{replica="127\.0\.0\.1:\d+",cause="connect_timeout"\} 1/);
    } finally {
      await g.close();
      await good.close();
      await front.close();
      await tls.close();
    }
  });

  it('an upstream apiKey holding CR or LF is refused by the config check', () => {
    for (const apiKey of ['abc\r\nx-injected: 1', 'abc\nx', 'has space']) {
      assert.throws(() => resolveConfig({ upstreams: [{ url: 'http://a:1', apiKey }] }), (e: unknown) =>
        e instanceof ConfigError && e.problems.some((p) => p.startsWith('/upstreams/0/apiKey')));
    }
    assert.equal(resolveConfig({ upstreams: [{ url: 'http://a:1', apiKey: 'sk-abc_123.XYZ' }] }).upstreams[0].apiKey, 'sk-abc_123.XYZ');
  });
});

async function startTlsFixture(): Promise<{ url: string; port: number; close(): Promise<void> }> {
  const server = createHttpsServer({ key: readFileSync('test/fixtures/tls/server.key'), cert: readFileSync('test/fixtures/tls/server.pem') }, (req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.url === '/v1/models') return void res.end('{"object":"list","data":[{"id":"fixture-model"}]}');
      if (req.url === '/health' || req.url === '/metrics') return void res.end();
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"tls-ok":true}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return { url: `https://127.0.0.1:${port}`, port, close: () => new Promise((r) => { server.closeAllConnections(); server.close(() => r()); }) };
}

async function startStallableFront(target: number): Promise<{ port: number; stall(): void; close(): Promise<void> }> {
  let stalled = false;
  const open = new Set<Socket>();
  const server = createTcpServer((client) => {
    open.add(client);
    client.on('close', () => open.delete(client));
    client.on('error', () => {});
    if (stalled) return;
    const up = connect(target, '127.0.0.1');
    open.add(up);
    up.on('error', () => client.destroy());
    up.on('close', () => { open.delete(up); client.destroy(); });
    client.on('close', () => up.destroy());
    client.pipe(up).pipe(client);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as AddressInfo).port,
    stall() {
      stalled = true;
      for (const s of open) s.destroy();
    },
    close: async () => {
      for (const s of open) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
