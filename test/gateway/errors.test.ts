import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { startFixture, type FixtureUpstream } from '../helpers/fixture-upstream.js';
import { chatBody, startGateway, type TestGateway } from '../helpers/gateway.js';
import { rawExchange } from '../helpers/raw-exchange.js';

interface Case { name: string; headers?: Record<string, string>; body: string | Buffer; path?: string; method?: string; status: number; code: string; param?: string | null; allow?: string }

const deep = (n: number) => '['.repeat(n) + ']'.repeat(n);

const cases: Case[] = [
  { name: 'invalid JSON', body: '{"model": "x", "messages": [', status: 400, code: 'invalid_json' },
  { name: 'empty body', body: '', status: 400, code: 'invalid_json' },
  { name: 'body that is not an object', body: '[1,2]', status: 400, code: 'invalid_request' },
  { name: 'messages of the wrong type', body: '{"model":"fixture-model","messages":"hi"}', status: 400, code: 'invalid_request', param: 'messages' },
  { name: 'model of the wrong type', body: '{"model":7,"messages":[]}', status: 400, code: 'invalid_request', param: 'model' },
  { name: 'stream of the wrong type', body: '{"model":"fixture-model","messages":[],"stream":"yes"}', status: 400, code: 'invalid_request', param: 'stream' },
  { name: 'completions without a prompt', path: '/v1/completions', body: '{"model":"fixture-model"}', status: 400, code: 'invalid_request', param: 'prompt' },
  { name: 'oversized body', body: JSON.stringify({ model: 'fixture-model', messages: [{ role: 'user', content: 'x'.repeat(5000) }] }), status: 413, code: 'request_too_large' },
  { name: 'session key over 256 bytes (header)', headers: { 'x-session-id': 'k'.repeat(257) }, body: chatBody(), status: 400, code: 'session_key_too_long' },
  { name: 'session key over 256 bytes (prompt_cache_key)', body: chatBody({ prompt_cache_key: 'é'.repeat(129) }), status: 400, code: 'session_key_too_long', param: 'prompt_cache_key' },
  { name: 'unknown model', body: chatBody({ model: 'no-such-model' }), status: 404, code: 'model_not_found', param: 'model' },
  { name: 'unknown path', path: '/v2/chat', body: '{}', status: 404, code: 'not_found' },
  { name: 'messages: []', body: '{"model":"fixture-model","messages":[]}', status: 400, code: 'invalid_request', param: 'messages' },
  { name: 'more messages than limits.maxMessages', body: JSON.stringify({ model: 'fixture-model', messages: Array.from({ length: 9 }, () => ({ role: 'user', content: 'x' })) }), status: 400, code: 'too_many_messages', param: 'messages' },
  { name: 'nesting deeper than limits.jsonDepth', body: `{"model":"fixture-model","messages":[{"role":"user","content":${deep(200)}}]}`, status: 400, code: 'nesting_too_deep' },
  { name: 'a non-JSON content type on a JSON route', headers: { 'content-type': 'text/plain' }, body: chatBody(), status: 415, code: 'unsupported_media_type' },
  { name: 'invalid UTF-8 in the body', body: Buffer.concat([Buffer.from('{"model":"fixture-model","messages":[{"role":"user","content":"'), Buffer.from([0xc3, 0x28]), Buffer.from('"}]}')]), status: 400, code: 'invalid_request' },
  { name: 'a session key with control characters (body)', body: chatBody({ prompt_cache_key: 'a\nb' }), status: 400, code: 'invalid_request', param: 'prompt_cache_key' },
  { name: 'a wrong method on an API route', method: 'GET', body: '', status: 405, code: 'method_not_allowed', allow: 'POST' },
  { name: 'a wrong method on /v1/models', method: 'POST', path: '/v1/models', body: '{}', status: 405, code: 'method_not_allowed', allow: 'GET, HEAD' },
];

describe('bad input gets an OpenAI-style error and the gateway keeps serving', () => {
  let a: FixtureUpstream;
  let g: TestGateway;
  before(async () => {
    a = await startFixture('a');
    g = await startGateway([a.url], { limits: { bodyBytes: 4096, maxMessages: 8 } });
  });
  after(async () => {
    await g.close();
    await a.close();
  });

  for (const c of cases) {
    it(`${c.name} → ${c.status} ${c.code}`, async () => {
      const res = await request(`${g.url}${c.path ?? '/v1/chat/completions'}`, {
        method: (c.method ?? 'POST') as 'POST', headers: { 'content-type': 'application/json', ...c.headers }, body: c.method === 'GET' ? undefined : c.body,
      });
      assert.equal(res.statusCode, c.status);
      if (c.allow) assert.equal(res.headers.allow, c.allow);
      assert.match(String(res.headers['content-type']), /application\/json/);
      const body = (await res.body.json()) as { error: { message: string; type: string; code: string; param: string | null } };
      assert.equal(body.error.code, c.code);
      assert.ok(body.error.message.length > 10, 'the message should explain');
      assert.ok(body.error.type.endsWith('_error'));
      if (c.param !== undefined) assert.equal(body.error.param, c.param);
      const ok = await request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: chatBody() });
      assert.equal(ok.statusCode, 200);
      assert.ok((await ok.body.text()).includes('[DONE]'));
    });
  }

  it('a session key header with a control character (a tab, which HTTP lets through) → 400', async () => {
    const body = chatBody();
    const answer = await rawExchange(Number(new URL(g.url).port), `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nx-session-id: abc\tdef\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`);
    assert.match(answer, /^HTTP\/1.1 400/);
    assert.match(answer, /control characters/);
  });

  it('HTTP framing errors → 400 and oversized headers → 431, both in OpenAI shape', async () => {
    const port = Number(new URL(g.url).port);
    const bad = await rawExchange(port, 'POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 5\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n');
    assert.match(bad, /^HTTP\/1.1 400/);
    assert.match(bad, /"code":"invalid_request"/);
    const big = await rawExchange(port, `GET /v1/models HTTP/1.1\r\nhost: x\r\nx-big: ${'a'.repeat(20_000)}\r\n\r\n`);
    assert.match(big, /^HTTP\/1.1 431/);
    assert.match(big, /"code":"headers_too_large"/);
  });

  it('a 413 reaches a client still uploading (the rest is read and dropped, not reset)', async () => {
    const { request: httpRequest } = await import('node:http');
    const port = Number(new URL(g.url).port);
    for (const chunked of [false, true]) {
      const status = await new Promise<number>((resolve, reject) => {
        const req = httpRequest({ host: '127.0.0.1', port, method: 'POST', path: '/v1/chat/completions', headers: chunked ? { 'content-type': 'application/json' } : { 'content-type': 'application/json', 'content-length': 2 * 1024 * 1024 } }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.on('error', reject);
        // 2 MiB in 64 KiB writes: far past the 4 KiB limit, written as fast as the socket takes it.
        const piece = Buffer.alloc(64 * 1024, 0x61);
        let sent = 0;
        const pump = () => {
          while (sent < 2 * 1024 * 1024) {
            sent += piece.length;
            if (!req.write(piece)) return void req.once('drain', pump);
          }
          req.end();
        };
        pump();
      });
      assert.equal(status, 413, chunked ? 'chunked upload' : 'declared upload');
    }
  });

  it('the session key limit is in bytes: 256 bytes pass', async () => {
    const res = await request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: { 'x-session-id': 'k'.repeat(256) }, body: chatBody() });
    assert.equal(res.statusCode, 200);
    await res.body.text();
  });
});

describe('upstream failures map to 502/503/504 naming the replica', () => {
  it('no healthy replica → 503, a stalled replica → 504, a refused connection → 502', async () => {
    const a = await startFixture('a');
    const g = await startGateway([a.url], { timeouts: { headersMs: 200, unstreamedHeadersMs: 200 }, limits: { maxRetries: 0 }, outlier: { baseEjectionMs: 60_000 } });
    try {
      // undici checks header/body timeouts on a ~0.5 s tick, so the stall is well past it.
      const slow = await request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: { 'x-fixture-gap-ms': '2000' }, body: chatBody({ stream: false }) });
      assert.equal(slow.statusCode, 504);
      const e504 = (await slow.body.json()) as { error: { code: string; message: string } };
      assert.equal(e504.error.code, 'upstream_timeout');
      assert.match(e504.error.message, new RegExp(`127\\.0\\.0\\.1:${a.port}`));

      await a.close();
      const refused = await request(`${g.url}/v1/chat/completions`, { method: 'POST', body: chatBody() });
      assert.equal(refused.statusCode, 502);
      const e502 = (await refused.body.json()) as { error: { code: string; message: string } };
      assert.equal(e502.error.code, 'upstream_unavailable');
      assert.ok(!e502.error.message.includes('http://'), 'the message names the replica, not its URL');

      const none = await request(`${g.url}/v1/chat/completions`, { method: 'POST', body: chatBody() });
      assert.equal(none.statusCode, 503);
      assert.equal(((await none.body.json()) as { error: { code: string } }).error.code, 'no_healthy_replica');
      const ready = await request(`${g.adminUrl}/readyz`);
      assert.equal(ready.statusCode, 503);
      await ready.body.text();
    } finally {
      await g.close();
    }
  });
});
