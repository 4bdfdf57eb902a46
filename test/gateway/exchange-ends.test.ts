/**
 * Issue 17: every way an exchange ends gives back every slot it held, once, and leaves its access
 * line — a client gone mid-upload, a request queued when the gateway shuts down, a client that
 * stops reading. Real sockets throughout.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { request } from 'undici';
import { startFixture } from '../helpers/fixture-upstream.js';
import { accessLines, chatBody, startGateway, waitForAccess } from '../helpers/gateway.js';
import { floodEvents, startRawReplica, sse } from '../helpers/raw-replica.js';
import { waitFor } from '../helpers/wait.js';

const sha = (k: string) => createHash('sha256').update(k).digest('hex');
const portOf = (url: string) => Number(new URL(url).port);

/** Opens a raw connection and writes `bytes`; resolves once connected and written. */
function rawOpen(port: number, bytes: string): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1', () => s.write(bytes, () => resolve(s)));
    s.on('error', reject);
  });
}

describe('issue 17 #2: a client that drops mid-upload gives its API key slot back and gets its access line', () => {
  it('ten dropped uploads do not lock out a maxConcurrent: 2 key', async () => {
    const a = await startFixture('a');
    const g = await startGateway([a.url], { auth: { apiKeys: [{ sha256: sha('sk-voice'), name: 'voice', maxConcurrent: 2 }] } });
    try {
      const body = chatBody({ stream: false });
      for (let i = 0; i < 10; i++) {
        // Headers and half the declared body, then the client goes.
        const s = await rawOpen(portOf(g.url), `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer sk-voice\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body.slice(0, body.length >> 1)}`);
        await new Promise<void>((r) => { s.on('close', () => r()); s.destroy(); });
      }
      // A leaked slot never comes back: the key would answer 429 for good.
      let status = 0;
      await waitFor('the key to take a request again', async () => {
        const res = await request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: 'Bearer sk-voice', 'content-type': 'application/json' }, body });
        await res.body.text();
        status = res.statusCode;
        return status === 200;
      }, 3_000).catch(() => assert.fail(`the key still answers ${status} after its uploads dropped`));
      const lines = (await waitForAccess(g, (ls) => ls.filter((l) => l.outcome === 'aborted').length >= 10)).filter((l) => l.outcome === 'aborted');
      assert.equal(lines.length, 10, 'each dropped upload has its access line');
      for (const l of lines) {
        assert.equal(l.key, 'voice');
        assert.equal(l.path, '/v1/chat/completions');
        assert.equal(l.status, 0);
      }
    } finally {
      await g.close();
      await a.close();
    }
  });
});

describe('issue 17 #2: a client that leaves while queued gives its place up at once and gets its access line', () => {
  it('limits.maxConcurrent 1, maxQueued 1: after the queued client left, the next one can queue again', async () => {
    const a = await startFixture('a');
    const g = await startGateway([a.url], { limits: { maxConcurrent: 1, maxQueued: 1 }, timeouts: { queueMs: 20_000 } });
    try {
      const held = await request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: { 'x-fixture-hold': 'held' }, body: chatBody() });
      const body = chatBody();
      const leaver = await rawOpen(portOf(g.url), `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`);
      await waitFor('the request to wait in the gateway-wide queue', async () => /warmroute_global_queued 1\b/.test(await scrape(g.adminUrl)));
      leaver.destroy();
      const [line] = await waitForAccess(g, (ls) => ls.some((l) => l.outcome === 'aborted'));
      assert.equal(line.outcome, 'aborted');
      await waitFor('its place in the queue to be free', async () => /warmroute_global_queued 0\b/.test(await scrape(g.adminUrl)));
      // Without its place back, this one would be refused: 503 queue_full.
      const next = request(`${g.url}/v1/chat/completions`, { method: 'POST', body: chatBody() });
      await waitFor('the next request to queue', async () => /warmroute_global_queued 1\b/.test(await scrape(g.adminUrl)));
      assert.ok(a.release('held'));
      await held.body.text();
      const answered = await next;
      assert.equal(answered.statusCode, 200);
      await answered.body.text();
    } finally {
      a.release('held');
      await g.close();
      await a.close();
    }
  });
});

describe('issue 17 #5: a request queued for the gateway-wide limit at shutdown gets 503 shutting_down', () => {
  it('the queued request is answered 503 with Retry-After at once; the open stream is served to its end', async () => {
    const a = await startFixture('a');
    const g = await startGateway([a.url], { limits: { maxConcurrent: 1, maxQueued: 4 }, timeouts: { queueMs: 20_000, drainMs: 20_000 } });
    let closing: Promise<void> | null = null;
    try {
      const open = await request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: { 'x-fixture-hold': 'open' }, body: chatBody() });
      assert.equal(open.statusCode, 200);
      // Held by the replica too: on the old path it would be admitted once `open` ends, then cut.
      const queued = request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: { 'x-fixture-hold': 'queued' }, body: chatBody() });
      await waitFor('the second request to wait in the gateway-wide queue', async () => /warmroute_global_queued 1\b/.test(await scrape(g.adminUrl)));
      closing = g.close();
      const refused = await queued;
      assert.equal(refused.statusCode, 503);
      assert.equal(refused.headers['retry-after'], '1');
      assert.equal(((await refused.body.json()) as { error: { code: string } }).error.code, 'shutting_down');
      assert.ok(a.release('open'));
      const text = await open.body.text();
      assert.match(text, /data: \[DONE\]/, 'the stream open at shutdown is served to its end');
      await closing;
      const lines = accessLines(g.logs);
      assert.ok(lines.some((l) => l.status === 503 && l.err === 'shutting_down'));
      assert.ok(lines.some((l) => l.status === 200 && l.outcome === 'complete'));
    } finally {
      a.release('queued');
      await (closing ?? g.close());
      await a.close();
    }
  });
});

describe('a request queued for a replica\'s slot at shutdown gets 503 shutting_down too', () => {
  it('limits.maxInflightPerReplica 1: the waiter is answered at once, not cut when the drain time runs out', async () => {
    const a = await startFixture('a');
    const g = await startGateway([a.url], { limits: { maxInflightPerReplica: 1, maxQueuedPerReplica: 4 }, timeouts: { queueMs: 20_000, drainMs: 20_000 } });
    let closing: Promise<void> | null = null;
    try {
      const open = await request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: { 'x-fixture-hold': 'open' }, body: chatBody() });
      assert.equal(open.statusCode, 200);
      const queued = request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: { 'x-fixture-hold': 'queued' }, body: chatBody() });
      await waitFor('the second request to wait for the replica', async () => /warmroute_queued\{replica="[^"]*"\} 1\b/.test(await scrape(g.adminUrl)));
      closing = g.close();
      const refused = await Promise.race([queued, new Promise<null>((r) => setTimeout(() => r(null), 3_000))]);
      assert.ok(refused !== null, 'answered before the drain ends');
      assert.equal(refused.statusCode, 503);
      assert.equal(refused.headers['retry-after'], '1');
      assert.equal(((await refused.body.json()) as { error: { code: string } }).error.code, 'shutting_down');
      assert.ok(a.release('open'));
      assert.match(await open.body.text(), /data: \[DONE\]/, 'the stream open at shutdown is served to its end');
      await closing;
      const lines = accessLines(g.logs);
      assert.ok(lines.some((l) => l.status === 503 && l.err === 'shutting_down' && l.attempts === 1));
    } finally {
      a.release('open');
      a.release('queued');
      await (closing ?? g.close());
      await a.close();
    }
  });
});

async function scrape(adminUrl: string): Promise<string> {
  return (await request(`${adminUrl}/metrics`)).body.text();
}

describe('issue 17 #6: a client that stops reading is ended after timeouts.clientStallMs', () => {
  it('disconnected loudly (metric, warn, access line), its upstream request aborted and its slots freed', async () => {
    // A replica that streams as fast as the gateway takes it, 64 KiB events, until it is stopped
    // (at most 256 MiB, so a gateway that never ends the exchange fails the test instead of hanging).
    let upstreamClosed = false;
    const event = sse({ id: 'c1', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: 'x'.repeat(64 * 1024) }, finish_reason: null }] });
    const replica = await startRawReplica((req) => {
      const s = req.socket;
      s.on('close', () => { upstreamClosed = true; });
      floodEvents(s, event);
    });
    const g = await startGateway([replica.url], { timeouts: { clientStallMs: 300 }, limits: { maxConcurrent: 4, maxInflightPerReplica: 4 } });
    const body = chatBody({ max_tokens: 4096 });
    const client = await rawOpen(portOf(g.url), `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`);
    // Reads nothing from here on.
    client.pause();
    const clientClosed = new Promise<void>((r) => client.on('close', () => r()));
    client.on('error', () => {});
    try {
      const [line] = await waitForAccess(g, (ls) => ls.length > 0, 30_000);
      assert.equal(line.outcome, 'stalled');
      assert.equal(line.err, 'client_stalled');
      await waitFor('the upstream request to be aborted', () => upstreamClosed, 5_000);
      // What the gateway had written before it closed is still in the client's buffers: read through to the close.
      client.resume();
      await clientClosed;
      const r = g.gw.registry.replicas[0];
      assert.equal(r.inflight, 0, 'the replica\'s in-flight count is back to 0');
      const metrics = await scrape(g.adminUrl);
      assert.match(metrics, /warmroute_client_stalls_total\{replica="[^"]+"\} 1/);
      assert.match(metrics, /warmroute_global_inflight 0/);
      assert.ok(g.logs.some((l) => l.level === 40 && /client stopped reading/.test(l.msg)), 'a warn line says so');
      // The slots are free: the next request goes through at once.
      const next = await request(`${g.url}/v1/models`);
      await next.body.text();
      assert.equal(next.statusCode, 200);
    } finally {
      client.destroy();
      await g.close();
      await replica.close();
    }
  });
});
