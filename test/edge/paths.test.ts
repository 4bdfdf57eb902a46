/**
 * Issue 17 #11: the path is normalised the way the replica's server reads it (unreserved
 * percent-encodings decoded) before routing, and only the /v1/* routes vLLM serves to clients are
 * forwarded (a documented list, extended by routes.extraPaths).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { resolveConfig } from '../../src/config/load.js';
import { request } from 'undici';
import { startFixture, type FixtureUpstream } from '../helpers/fixture-upstream.js';
import { chatBody, startGateway, type TestGateway } from '../helpers/gateway.js';
import { rawExchange } from '../helpers/raw-exchange.js';

const post = (g: TestGateway, path: string, body: string, headers: Record<string, string> = {}) =>
  request(`${g.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });

describe('path normalisation and the forwarded routes (issue 17 #11)', () => {
  let a: FixtureUpstream;
  let g: TestGateway;
  before(async () => {
    a = await startFixture('a');
    g = await startGateway([a.url]);
  });
  after(async () => { await g.close(); await a.close(); });

  it('POST /v1/chat/%63ompletions is chat completions: validated, routed with affinity, pinned', async () => {
    // Validation: a body the chat route refuses is refused here too, before any replica sees it.
    const from = a.seen.length;
    const bad = await post(g, '/v1/chat/%63ompletions', JSON.stringify({ model: 'fixture-model', messages: 'not a list' }));
    const err = (await bad.body.json()) as { error: { type: string } };
    assert.equal(bad.statusCode, 400);
    assert.equal(err.error.type, 'invalid_request_error');
    assert.equal(a.seen.slice(from).filter((r) => r.headers['x-forwarded-for'] !== undefined).length, 0, 'not forwarded');
    // Affinity: the session key is read and pinned, as on the plain path.
    const res = await post(g, '/v1/%63hat/c%6Fmpletions', chatBody({ stream: false }), { 'x-session-id': 'encoded-path-1' });
    await res.body.text();
    assert.equal(res.statusCode, 200);
    assert.notEqual(res.headers['x-warmroute-route'], 'passthrough');
    assert.ok(g.gw.router.session('encoded-path-1'), 'the session is pinned');
    const again = await post(g, '/v1/chat/%63ompletions', chatBody({ stream: false }), { 'x-session-id': 'encoded-path-1' });
    await again.body.text();
    assert.equal(again.headers['x-warmroute-route'], 'pinned');
    assert.equal(a.seen.filter((r) => r.headers['x-forwarded-for'] !== undefined).at(-1)!.url, '/v1/chat/completions', 'the replica is sent the decoded path');
  });

  it('other unreserved encodings decode too; reserved ones stay encoded and match no route', async () => {
    const emb = await post(g, '/v1/%65mbeddings', '{"input":"x"}');
    assert.deepEqual(await emb.body.json(), { echo: '/v1/embeddings', bytes: 13 });
    const port = Number(new URL(g.url).port);
    const reserved = await rawExchange(port, `POST /v1/chat%3Bcompletions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}`);
    assert.match(reserved, /^HTTP\/1.1 404/);
  });

  it('vLLM\'s operator routes (/v1/load_lora_adapter, ...) and unknown /v1/* paths are a 404, not forwarded', async () => {
    const from = a.seen.length;
    for (const path of ['/v1/load_lora_adapter', '/v1/unload_lora_adapter', '/v1/%6Coad_lora_adapter', '/v1/anything']) {
      const res = await post(g, path, '{"lora_name":"x","lora_path":"/tmp/evil"}');
      const body = (await res.body.json()) as { error: { type: string; code: string; message: string } };
      assert.equal(res.statusCode, 404, path);
      assert.equal(body.error.type, 'not_found_error');
      assert.equal(body.error.code, 'not_found');
    }
    assert.deepEqual(a.seen.slice(from).filter((r) => r.headers['x-forwarded-for'] !== undefined).map((r) => r.url), []);
  });

  it('the documented client routes pass', async () => {
    for (const path of ['/v1/embeddings', '/v1/score', '/v1/rerank', '/v1/audio/transcriptions']) {
      const res = await post(g, path, '{}');
      assert.deepEqual(await res.body.json(), { echo: path, bytes: 2 }, path);
    }
  });
});

describe('routes.extraPaths (issue 17 #11)', () => {
  let a: FixtureUpstream;
  let open: TestGateway;
  before(async () => {
    a = await startFixture('a');
    open = await startGateway([a.url], { routes: { extraPaths: ['/v1/tokenize', '/v1/custom/*', '/v1/*'] } });
  });
  after(async () => { await open.close(); await a.close(); });

  it('adds exact paths and /* prefixes to the forwarded routes, and nothing else', async () => {
    for (const path of ['/v1/tokenize', '/v1/custom/thing']) {
      const res = await post(open, path, '{}');
      assert.deepEqual(await res.body.json(), { echo: path, bytes: 2 }, path);
    }
    // Not even under a prefix that covers them: a client never loads or unloads an adapter.
    for (const path of ['/v1/load_lora_adapter', '/v1/unload_lora_adapter']) {
      const res = await post(open, path, '{"lora_name":"x","lora_path":"/tmp/evil"}');
      await res.body.text();
      assert.equal(res.statusCode, 404, path);
    }
  });

  it('refuses a configuration that lists vLLM\'s operator routes', () => {
    assert.throws(() => resolveConfig({ upstreams: [{ url: 'http://127.0.0.1:1' }], routes: { extraPaths: ['/v1/load_lora_adapter'] } }), /extraPaths\/0: \/v1\/load_lora_adapter is vLLM's operator route/);
  });
});
