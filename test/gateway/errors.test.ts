import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { startFixture, type FixtureUpstream } from '../helpers/fixture-upstream.js';
import { chatBody, startGateway, type TestGateway } from '../helpers/gateway.js';

interface Case { name: string; headers?: Record<string, string>; body: string; path?: string; status: number; code: string; param?: string | null }

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
];

describe('bad input gets an OpenAI-style error and the gateway keeps serving', () => {
  let a: FixtureUpstream;
  let g: TestGateway;
  before(async () => {
    a = await startFixture('a');
    g = await startGateway([a.url], { limits: { bodyBytes: 4096 } });
  });
  after(async () => {
    await g.close();
    await a.close();
  });

  for (const c of cases) {
    it(`${c.name} → ${c.status} ${c.code}`, async () => {
      const res = await request(`${g.url}${c.path ?? '/v1/chat/completions'}`, {
        method: 'POST', headers: { 'content-type': 'application/json', ...c.headers }, body: c.body,
      });
      assert.equal(res.statusCode, c.status);
      assert.match(String(res.headers['content-type']), /application\/json/);
      const body = (await res.body.json()) as { error: { message: string; type: string; code: string; param: string | null } };
      assert.equal(body.error.code, c.code);
      assert.ok(body.error.message.length > 10, 'the message should explain');
      assert.ok(body.error.type.endsWith('_error'));
      if (c.param !== undefined) assert.equal(body.error.param, c.param);
      const ok = await request(`${g.url}/v1/chat/completions`, { method: 'POST', body: chatBody() });
      assert.equal(ok.statusCode, 200);
      assert.ok((await ok.body.text()).includes('[DONE]'));
    });
  }

  it('the session key limit is in bytes: 256 bytes pass', async () => {
    const res = await request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: { 'x-session-id': 'k'.repeat(256) }, body: chatBody() });
    assert.equal(res.statusCode, 200);
    await res.body.text();
  });
});

describe('upstream failures map to 502/503/504 naming the replica', () => {
  it('no healthy replica → 503, a stalled replica → 504, a refused connection → 502', async () => {
    const a = await startFixture('a');
    const g = await startGateway([a.url], { timeouts: { headersMs: 200 }, limits: { maxRetries: 0 }, outlier: { baseEjectionMs: 60_000 } });
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
