import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { startFixture, type FixtureUpstream } from '../helpers/fixture-upstream.js';
import { accessLines, chatBody, startGateway, waitForAccess, type TestGateway } from '../helpers/gateway.js';
import { rawExchange } from '../helpers/raw-exchange.js';
import { waitFor } from '../helpers/wait.js';

const sha = (k: string) => createHash('sha256').update(k).digest('hex');
const JSON_HEADERS = { 'content-type': 'application/json' };
const ADMIN_TOKEN = 'admin-token-0123456789abcdef';

describe('access: client API keys, the admin token, what is forwarded, what is logged', () => {
  let a: FixtureUpstream;
  let g: TestGateway;
  let keyFile: string;
  before(async () => {
    a = await startFixture('a');
    keyFile = join(mkdtempSync(join(tmpdir(), 'warmroute-keys-')), 'keys.yaml');
    writeFileSync(keyFile, `- { sha256: ${sha('file-key-1')}, name: from-file }\n`);
    g = await startGateway([a.url], {
      auth: { apiKeys: [{ sha256: sha('sk-voice-1'), name: 'voice', maxConcurrent: 2 }], apiKeysFile: keyFile },
      admin: { token: ADMIN_TOKEN },
      logging: { level: 'trace' },
    });
  });
  after(async () => { await g.close(); await a.close(); });

  const chat = (key: string | null, extra: Record<string, string> = {}) => request(`${g.url}/v1/chat/completions`, {
    method: 'POST', headers: { ...JSON_HEADERS, ...(key === null ? {} : { authorization: `Bearer ${key}` }), ...extra }, body: chatBody(),
  });

  it('a missing or wrong key is a 401 invalid_api_key; a configured one passes, and is not forwarded', async () => {
    for (const [key, reason] of [[null, 'missing'], ['sk-wrong', 'invalid']] as const) {
      const res = await chat(key);
      assert.equal(res.statusCode, 401);
      const err = ((await res.body.json()) as { error: { code: string; type: string } }).error;
      assert.equal(err.code, 'invalid_api_key');
      assert.equal(err.type, 'invalid_request_error');
      const metrics = await (await request(`${g.adminUrl}/metrics`)).body.text();
      assert.match(metrics, new RegExp(`warmroute_auth_failures_total\\{reason="${reason}"\\} [1-9]`));
    }
    const from = a.seen.length;
    const logged = accessLines(g.logs).length;
    const ok = await chat('sk-voice-1');
    assert.equal(ok.statusCode, 200);
    await ok.body.text();
    const seen = a.seen.slice(from).find((r) => r.url.endsWith('/completions'))!;
    assert.equal(seen.headers.authorization, undefined, "the gateway's client key never reaches a replica");
    assert.equal((await waitForAccess(g, (ls) => ls.length > logged)).at(-1)!.key, 'voice');
    const metrics = await (await request(`${g.adminUrl}/metrics`)).body.text();
    assert.match(metrics, /warmroute_client_requests_total\{key="voice",code="2xx"\} [1-9]/);
    assert.doesNotMatch(metrics, /sk-voice-1/);
  });

  it('a key past its concurrency limit gets a 429 with Retry-After; its slots come back', async () => {
    // Held at the replica until released: streams of a fixed length could end, and give their slots
    // back, before a slow machine sent the third request.
    const hold = { 'x-fixture-hold': 'key-limit' };
    const held = [chat('sk-voice-1', hold), chat('sk-voice-1', hold)];
    const [r1, r2] = await Promise.all(held);
    const third = await chat('sk-voice-1');
    assert.equal(third.statusCode, 429);
    assert.equal(third.headers['retry-after'], '1');
    assert.equal(((await third.body.json()) as { error: { code: string } }).error.code, 'rate_limit_exceeded');
    a.release('key-limit');
    await Promise.all([r1.body.text(), r2.body.text()]);
    const after = await chat('sk-voice-1');
    assert.equal(after.statusCode, 200);
    await after.body.text();
  });

  it('keys from the file work, and the file is reloaded when it changes; a broken file keeps the keys in force', async () => {
    const first = await chat('file-key-1');
    assert.equal(first.statusCode, 200);
    await first.body.text();
    writeFileSync(keyFile, `- { sha256: ${sha('file-key-2')}, name: rotated }\n`);
    let status = 0;
    for (let i = 0; i < 80 && status !== 200; i++) {
      const res = await chat('file-key-2');
      status = res.statusCode;
      await res.body.text();
      if (status !== 200) await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(status, 200, 'the new key works after the reload');
    const old = await chat('file-key-1');
    assert.equal(old.statusCode, 401);
    await old.body.text();
    writeFileSync(keyFile, '- { sha256: not-a-hash }\n');
    await waitFor('the broken keys file to be rejected', () => g.logs.some((l) => l.msg?.includes('API keys file rejected')), 8000);
    const still = await chat('file-key-2');
    assert.equal(still.statusCode, 200);
    await still.body.text();
  });

  it('the admin token guards /admin/*, mutations included; /metrics, /healthz and /readyz stay open', async () => {
    for (const path of ['/metrics', '/healthz', '/readyz']) {
      const res = await request(`${g.adminUrl}${path}`);
      assert.equal(res.statusCode, 200, path);
      await res.body.text();
    }
    for (const [method, path] of [['GET', '/admin/replicas'], ['GET', '/admin/routing'], ['DELETE', '/admin/sessions/x'], ['GET', '//admin/replicas'], ['GET', '/%61dmin/replicas']] as const) {
      const res = await request(`${g.adminUrl}${path}`, { method });
      assert.equal(res.statusCode, 401, `${method} ${path}`);
      await res.body.text();
      const wrong = await request(`${g.adminUrl}${path}`, { method, headers: { authorization: 'Bearer not-the-token-at-all' } });
      assert.equal(wrong.statusCode, 401);
      await wrong.body.text();
    }
    const ok = await request(`${g.adminUrl}/admin/replicas`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    assert.equal(ok.statusCode, 200);
    await ok.body.text();
  });

  it('only /v1/* reaches a replica, after normalisation: /v1/../metrics and encoded variants never do', async () => {
    const port = Number(new URL(g.url).port);
    const from = a.seen.length;
    const tries = ['/v1/../metrics', '/v1/%2e%2e/metrics', '/v1/%2E%2E/health', '/v1/..%2fmetrics', '/v1/%2e%2e%2fhealth', '/v1/./../metrics', '/v1//..//metrics', '/v1/\\..\\metrics'];
    for (const path of tries) {
      const answer = await rawExchange(port, `GET ${path} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer sk-voice-1\r\nconnection: close\r\n\r\n`);
      assert.match(answer, /^HTTP\/1.1 (400|404)/, `${path}: ${answer.slice(0, 40)}`);
    }
    // Forwarded requests carry x-forwarded-for; the gateway's own health probes do not.
    const forwarded = a.seen.slice(from).filter((r) => r.headers['x-forwarded-for'] !== undefined);
    assert.deepEqual(forwarded.map((r) => r.url), []);
    // And the normalised form of a /v1 path is what the replica sees.
    const norm = await rawExchange(port, `GET /v1/x/../embeddings HTTP/1.1\r\nhost: x\r\nauthorization: Bearer sk-voice-1\r\nconnection: close\r\n\r\n`);
    assert.match(norm, /^HTTP\/1.1 200/);
    assert.ok(a.seen.some((r) => r.url === '/v1/embeddings' && r.headers['x-forwarded-for'] !== undefined));
  });

  it('no header or target sends the gateway anywhere but a configured replica', async () => {
    const port = Number(new URL(g.url).port);
    const from = a.seen.length;
    const answer = await rawExchange(port, `GET http://169.254.169.254/v1/embeddings HTTP/1.1\r\nhost: 169.254.169.254\r\nx-forwarded-host: evil.example\r\nauthorization: Bearer sk-voice-1\r\nconnection: close\r\n\r\n`);
    assert.match(answer, /^HTTP\/1.1 200/);
    assert.ok(a.seen.slice(from).some((r) => r.url === '/v1/embeddings'), 'it went to the configured replica');
  });

  it('authorization, cookies and keys are redacted in every log line', async () => {
    g.gw.log.warn({ headers: { authorization: 'Bearer sk-voice-1', cookie: 'session=abc' }, apiKey: 'sk-replica', token: ADMIN_TOKEN }, 'a line holding credentials');
    await waitFor('the line to be logged', () => g.logs.some((l) => l.msg === 'a line holding credentials'));
    const line = g.logs.find((l) => l.msg === 'a line holding credentials')!;
    assert.equal(line.headers.authorization, '[redacted]');
    assert.equal(line.headers.cookie, '[redacted]');
    assert.equal(line.apiKey, '[redacted]');
    assert.equal(line.token, '[redacted]');
    const all = JSON.stringify(g.logs);
    for (const secret of ['sk-voice-1', 'file-key-1', 'file-key-2', ADMIN_TOKEN]) assert.ok(!all.includes(secret), `${secret} appears in a log line`);
  });
});
