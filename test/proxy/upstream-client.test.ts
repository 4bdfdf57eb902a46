import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer as createNetServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { createUpstreamClient, type UpstreamClient, type UpstreamRequest } from '../../src/proxy/upstream/client.js';

interface Result { status: number; headers: string[]; body: string; error: (Error & { code?: string }) | null; sent: boolean }

function run(client: UpstreamClient, req: Partial<UpstreamRequest> & { origin: string }, hooks: { onData?: (c: Buffer, resume: () => void) => boolean; abortAfterFirstChunk?: boolean } = {}): Promise<Result> {
  return new Promise((resolve) => {
    const out: Result = { status: 0, headers: [], body: '', error: null, sent: false };
    let abort!: (e: Error) => void;
    let resume!: () => void;
    client.dispatch({ path: '/v1/x', method: 'POST', headers: ['content-type', 'application/json'], body: Buffer.from('{"a":1}'), headersTimeout: 2_000, bodyTimeout: 2_000, ...req }, {
      onConnect(a) { abort = a; },
      onRequestSent() { out.sent = true; },
      onHeaders(status, headers, r) { out.status = status; out.headers = headers; resume = r; return true; },
      onData(c) {
        out.body += c.toString();
        if (hooks.abortAfterFirstChunk) { abort(Object.assign(new Error('client gone'), { code: 'TEST_ABORT' })); return false; }
        return hooks.onData ? hooks.onData(c, resume) : true;
      },
      onComplete() { resolve(out); },
      onError(e) { out.error = e; resolve(out); },
    });
  });
}

const servers: (Server | HttpServer)[] = [];
after(() => { for (const s of servers) s.close(); });

async function listen<T extends Server | HttpServer>(s: T): Promise<{ server: T; origin: string; sockets: Socket[] }> {
  const sockets: Socket[] = [];
  s.on('connection', (c: Socket) => sockets.push(c));
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  servers.push(s);
  return { server: s, origin: `http://127.0.0.1:${(s.address() as AddressInfo).port}`, sockets };
}

describe('upstream client', () => {
  it('sends head and body, reads a chunked stream, and reuses the connection', async () => {
    const seen: { method: string; url: string; host: string; length: string; body: string }[] = [];
    const { origin, sockets } = await listen(createHttpServer((req, res) => {
      let body = '';
      req.on('data', (c) => { body += c; });
      req.on('end', () => {
        seen.push({ method: req.method!, url: req.url!, host: req.headers.host!, length: req.headers['content-length']!, body });
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write('data: 1\n\n');
        setTimeout(() => res.end('data: [DONE]\n\n'), 5);
      });
    }));
    const client = createUpstreamClient({ connectTimeoutMs: 1_000 });
    for (let i = 0; i < 3; i++) {
      const r = await run(client, { origin });
      assert.equal(r.error, null);
      assert.equal(r.status, 200);
      assert.equal(r.sent, true);
      assert.equal(r.body, 'data: 1\n\ndata: [DONE]\n\n');
      assert.ok(r.headers.includes('text/event-stream'));
    }
    assert.equal(sockets.length, 1, 'one keep-alive connection for three requests');
    assert.deepEqual(seen[0], { method: 'POST', url: '/v1/x', host: new URL(origin).host, length: '7', body: '{"a":1}' });
    assert.deepEqual(client.connections()[origin], { busy: 0, idle: 1 });
    await client.close();
    assert.deepEqual(client.connections()[origin], { busy: 0, idle: 0 });
  });

  it('honours connection: close (a new connection for the next request)', async () => {
    const { origin, sockets } = await listen(createHttpServer((req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(200, { connection: 'close', 'content-length': '2' }).end('ok'));
    }));
    const client = createUpstreamClient({ connectTimeoutMs: 1_000 });
    assert.equal((await run(client, { origin })).body, 'ok');
    assert.equal((await run(client, { origin })).body, 'ok');
    assert.equal(sockets.length, 2);
    await client.close();
  });

  it('a kept-alive connection the replica closes as a request is written: sent again once on a new one', async () => {
    // Answers the first request of each connection, then closes the connection on the next one
    // without reading it: the race with a replica's keep-alive timeout.
    const { origin, sockets } = await listen(createNetServer((s) => {
      let served = 0;
      s.on('data', () => {
        if (served++ === 0) s.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok');
        else s.destroy();
      });
    }));
    const stale: string[] = [];
    const client = createUpstreamClient({ connectTimeoutMs: 1_000, onStaleRetry: (o) => stale.push(o) });
    assert.equal((await run(client, { origin })).body, 'ok');
    const r = await run(client, { origin });
    assert.equal(r.error, null);
    assert.equal(r.body, 'ok');
    assert.deepEqual(stale, [origin]);
    assert.equal(sockets.length, 2);
    await client.close();
  });

  it('a new connection closed before any byte is an error, not retried', async () => {
    const { origin, sockets } = await listen(createNetServer((s) => s.on('data', () => s.destroy())));
    const stale: string[] = [];
    const client = createUpstreamClient({ connectTimeoutMs: 1_000, onStaleRetry: (o) => stale.push(o) });
    const r = await run(client, { origin });
    assert.ok(r.error);
    assert.ok(['WR_SOCKET_CLOSED', 'ECONNRESET'].includes(r.error.code!), r.error.code);
    assert.deepEqual(stale, []);
    assert.equal(sockets.length, 1);
    await client.close();
  });

  it('refused connection → ECONNREFUSED', async () => {
    const { server, origin } = await listen(createNetServer());
    await new Promise<void>((r) => server.close(() => r()));
    const client = createUpstreamClient({ connectTimeoutMs: 1_000 });
    const r = await run(client, { origin });
    assert.equal(r.error?.code, 'ECONNREFUSED');
    await client.close();
  });

  it('no response head within headersTimeout → WR_HEADERS_TIMEOUT; silence mid-body → WR_BODY_TIMEOUT', async () => {
    const { origin } = await listen(createNetServer((s) => s.on('data', (d) => {
      if (d.toString().startsWith('POST /stall-body')) s.write('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n');
    })));
    const client = createUpstreamClient({ connectTimeoutMs: 1_000 });
    const t0 = performance.now();
    const h = await run(client, { origin, path: '/stall-head', headersTimeout: 150 });
    assert.equal(h.error?.code, 'WR_HEADERS_TIMEOUT');
    assert.ok(performance.now() - t0 < 1_000);
    const b = await run(client, { origin, path: '/stall-body', bodyTimeout: 150 });
    assert.equal(b.status, 200);
    assert.equal(b.body, 'hello');
    assert.equal(b.error?.code, 'WR_BODY_TIMEOUT');
    await client.close();
  });

  it('a replica dying mid-body is an error after the bytes it sent', async () => {
    const { origin } = await listen(createNetServer((s) => s.on('data', () => {
      s.write('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n');
      setTimeout(() => s.destroy(), 20);
    })));
    const client = createUpstreamClient({ connectTimeoutMs: 1_000 });
    const r = await run(client, { origin });
    assert.equal(r.body, 'hello');
    assert.ok(['WR_SOCKET_CLOSED', 'ECONNRESET'].includes(r.error?.code ?? ''), r.error?.code);
    await client.close();
  });

  it('a malformed response → WR_BAD_RESPONSE, and the connection is not reused', async () => {
    const { origin, sockets } = await listen(createNetServer((s) => s.on('data', () => s.write('HTTP/1.1 200 OK\r\ncontent-length: x\r\n\r\n'))));
    const client = createUpstreamClient({ connectTimeoutMs: 1_000 });
    assert.equal((await run(client, { origin })).error?.code, 'WR_BAD_RESPONSE');
    assert.equal((await run(client, { origin })).error?.code, 'WR_BAD_RESPONSE');
    assert.equal(sockets.length, 2);
    await client.close();
  });

  it('bytes after the end of a response: that connection is not reused', async () => {
    const { origin, sockets } = await listen(createNetServer((s) => s.on('data', () => s.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nokGARBAGE'))));
    const client = createUpstreamClient({ connectTimeoutMs: 1_000 });
    assert.equal((await run(client, { origin })).body, 'ok');
    assert.equal((await run(client, { origin })).body, 'ok');
    assert.equal(sockets.length, 2);
    assert.deepEqual(client.connections()[origin], { busy: 0, idle: 0 });
    await client.close();
  });

  it('abort mid-body closes the connection at once and ends the exchange with the abort error', async () => {
    let closedAt = 0;
    const { origin } = await listen(createHttpServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: 1\n\n');
      const t = setInterval(() => res.write('data: more\n\n'), 10);
      res.on('close', () => { clearInterval(t); closedAt = performance.now(); });
    }));
    const client = createUpstreamClient({ connectTimeoutMs: 1_000 });
    const r = await run(client, { origin }, { abortAfterFirstChunk: true });
    const abortedAt = performance.now();
    assert.equal(r.error?.code, 'TEST_ABORT');
    for (let i = 0; i < 50 && closedAt === 0; i++) await new Promise((res) => setTimeout(res, 10));
    assert.ok(closedAt > 0 && closedAt - abortedAt < 100, 'the replica sees the close within 100 ms');
    assert.deepEqual(client.connections()[origin], { busy: 0, idle: 0 });
    await client.close();
  });

  it('onData returning false pauses reading until resume; the whole body still arrives', async () => {
    const big = 'x'.repeat(256 * 1024);
    const { origin } = await listen(createHttpServer((req, res) => { req.resume(); res.end(big); }));
    const client = createUpstreamClient({ connectTimeoutMs: 1_000 });
    let pauses = 0;
    const r = await run(client, { origin }, {
      onData: (_c, resume) => {
        pauses++;
        setTimeout(resume, 1);
        return false;
      },
    });
    assert.equal(r.error, null);
    assert.equal(r.body.length, big.length);
    assert.ok(pauses >= 1);
    // The connection went back to the pool reading again: it serves the next request.
    assert.equal((await run(client, { origin })).body.length, big.length);
    await client.close();
  });

  it('close() waits for busy connections and refuses new requests', async () => {
    const { origin } = await listen(createHttpServer((req, res) => { req.resume(); setTimeout(() => res.end('late'), 50); }));
    const client = createUpstreamClient({ connectTimeoutMs: 1_000 });
    const pending = run(client, { origin });
    await new Promise((r) => setTimeout(r, 10));
    const closing = client.close();
    assert.equal((await run(client, { origin })).error?.code, 'WR_CLIENT_CLOSED');
    assert.equal((await pending).body, 'late');
    await closing;
  });

  it('speaks TLS to an https replica (verified against the given CA) and keeps the connection', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'warmroute-tls-'));
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=localhost',
      '-addext', 'subjectAltName=DNS:localhost', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')], { stdio: 'ignore' });
    const cert = readFileSync(join(dir, 'cert.pem'));
    const { origin, sockets } = await listen(createHttpsServer({ key: readFileSync(join(dir, 'key.pem')), cert }, (req, res) => {
      req.resume();
      req.on('end', () => res.end('secure'));
    }));
    const httpsOrigin = origin.replace('http://127.0.0.1', 'https://localhost');
    const trusted = createUpstreamClient({ connectTimeoutMs: 2_000, tls: { ca: cert } });
    assert.equal((await run(trusted, { origin: httpsOrigin })).body, 'secure');
    assert.equal((await run(trusted, { origin: httpsOrigin })).body, 'secure');
    assert.equal(sockets.length, 1);
    await trusted.close();
    const untrusting = createUpstreamClient({ connectTimeoutMs: 2_000 });
    const r = await run(untrusting, { origin: httpsOrigin });
    assert.match(r.error?.code ?? '', /SELF_SIGNED|UNABLE_TO_VERIFY/);
    await untrusting.close();
  });
});
