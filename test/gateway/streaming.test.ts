import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { request as httpRequest } from 'node:http';
import { request } from 'undici';
import { lastCompletion, startFixture } from '../helpers/fixture-upstream.js';
import { accessLines, chatBody, fixtureAndGateway, startGateway, waitForAccess } from '../helpers/gateway.js';

describe('streaming through the gateway', () => {
  const env = fixtureAndGateway();

  it('the official openai client streams a chat completion through it', async () => {
    const client = new OpenAI({ baseURL: `${env.g.url}/v1`, apiKey: 'sk-test', maxRetries: 0 });
    const stream = await client.chat.completions.create({
      model: 'fixture-model',
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: 'user', content: 'hi' }],
    });
    let text = '';
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const c of stream) {
      text += c.choices[0]?.delta?.content ?? '';
      if (c.usage) usage = c.usage;
    }
    assert.equal(text, 'tok0 tok1 tok2 ');
    assert.equal(usage?.prompt_tokens_details?.cached_tokens, 32);
  });

  it('the streamed body is byte-for-byte what the replica sent, and the request body is the bytes the client sent', async () => {
    // Odd spacing and key order: a re-serialising proxy would change these bytes.
    const body = '{"model":"fixture-model",  "messages":[{"role":"user","content":"h\\u00e9llo"}],"stream":true, "stream_options":{"include_usage":true}}';
    const headers = { 'content-type': 'application/json', 'x-fixture-chunks': '20' };
    const direct = await request(`${env.a.url}/v1/chat/completions`, { method: 'POST', headers, body });
    const directBytes = Buffer.from(await direct.body.arrayBuffer());
    const before = env.a.seen.length;
    const via = await request(`${env.g.url}/v1/chat/completions`, { method: 'POST', headers, body });
    const viaBytes = Buffer.from(await via.body.arrayBuffer());
    assert.equal(via.statusCode, 200);
    assert.ok(viaBytes.length > 2000);
    assert.ok(viaBytes.equals(directBytes), 'streamed bytes differ');
    assert.ok(lastCompletion(env.a, before).body.equals(Buffer.from(body)), 'request bytes differ');
  });

  it('delivers the first content chunk while the replica is still generating', async () => {
    // The replica sends one content chunk, then waits until the client has it: the rest of the
    // answer cannot have been sent yet, however slow the machine. (A gateway that held the chunk
    // back would only pass it on once the fixture gave up waiting, and release() would say so.)
    const res = await request(`${env.g.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-fixture-chunks': '4', 'x-fixture-hold': 'first-chunk', 'x-fixture-hold-after': '1' },
      body: chatBody(),
    });
    let text = '';
    let whileGenerating: boolean | null = null;
    for await (const c of res.body) {
      text += c.toString();
      if (whileGenerating === null && text.includes('tok0')) whileGenerating = env.a.release('first-chunk');
    }
    assert.equal(whileGenerating, true, 'the first chunk reached the client only after the replica had sent the rest');
    assert.match(text, /tok0 [\s\S]*tok3 [\s\S]*data: \[DONE\]/);
  });

  it('forwards non-streaming responses untouched and reads their usage', async () => {
    const direct = await request(`${env.a.url}/v1/chat/completions`, { method: 'POST', body: chatBody({ stream: false }) });
    const directText = await direct.body.text();
    const logged = accessLines(env.g.logs).length;
    const res = await request(`${env.g.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: chatBody({ stream: false }) });
    assert.equal(res.statusCode, 200);
    assert.equal(await res.body.text(), directText);
    const line = (await waitForAccess(env.g, (ls) => ls.length > logged)).at(-1)!;
    assert.equal(line.stream, false);
    assert.equal(line.cachedTokens, 16);
    // Its first byte comes after the whole generation: not a time to first token.
    assert.equal(line.ttftMs, undefined);
    assert.equal(line.firstToken, undefined);
  });

  it('strips hop-by-hop headers, sets x-forwarded-for and names the replica, never its URL', async () => {
    const before = env.a.seen.length;
    // node:http, because undici refuses to send hop-by-hop headers at all.
    const res = await new Promise<import('node:http').IncomingMessage>((resolve, reject) => {
      const req = httpRequest(`${env.g.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', connection: 'keep-alive, x-drop-me', 'x-drop-me': '1', 'keep-alive': 'timeout=5', 'x-keep-me': 'yes', 'x-forwarded-for': '10.1.2.3' },
      }, resolve);
      req.on('error', reject);
      req.end(chatBody());
    });
    for await (const _ of res) { /* drain */ }
    const seen = lastCompletion(env.a, before).headers;
    assert.equal(seen['x-drop-me'], undefined);
    assert.equal(seen['keep-alive'], undefined);
    assert.equal(seen['x-keep-me'], 'yes');
    assert.equal(seen['x-forwarded-for'], '10.1.2.3, 127.0.0.1');
    assert.equal(res.headers['x-warmroute-replica'], `127.0.0.1:${env.a.port}`);
    assert.match(String(res.headers['server-timing']), /^parse;dur=[\d.]+, route;dur=[\d.]+, queue;dur=[\d.]+, connect;dur=[\d.]+, upstream_headers;dur=[\d.]+$/);
  });

  it('forwards other /v1 paths as they are and answers /v1/models from the fleet', async () => {
    const res = await request(`${env.g.url}/v1/embeddings`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"input":"x"}' });
    assert.deepEqual(await res.body.json(), { echo: '/v1/embeddings', bytes: 13 });
    const models = await request(`${env.g.url}/v1/models`);
    const list = (await models.body.json()) as { data: { id: string }[] };
    assert.deepEqual(list.data.map((m) => m.id), ['fixture-model']);
  });
});

describe('client credentials and replica api keys', () => {
  it('passes the client Authorization through, unless the replica has its own key, which never leaks', async () => {
    const a = await startFixture('a');
    const plain = await startGateway([a.url]);
    const keyed = await startGateway([], { upstreams: undefined }).catch(() => null);
    assert.equal(keyed, null); // a gateway without upstreams does not start
    try {
      let res = await request(`${plain.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: 'Bearer client-key' }, body: chatBody() });
      await res.body.text();
      assert.equal(lastCompletion(a).headers.authorization, 'Bearer client-key');

      const { resolveConfig } = await import('../../src/config/load.js');
      const { buildGateway } = await import('../../src/server.js');
      const pino = (await import('pino')).default;
      const lines: string[] = [];
      const gw = buildGateway(resolveConfig({
        upstreams: [{ url: a.url, apiKey: 'replica-secret' }],
        listen: { host: '127.0.0.1', port: 0 }, admin: { host: '127.0.0.1', port: 0 },
      }), { log: pino({ level: 'debug' }, { write: (s: string) => { lines.push(s); } }), defaultMetrics: false });
      const { url, adminUrl } = await gw.listen();
      res = await request(`${url}/v1/chat/completions`, { method: 'POST', headers: { authorization: 'Bearer client-key' }, body: chatBody() });
      const text = await res.body.text();
      assert.equal(lastCompletion(a).headers.authorization, 'Bearer replica-secret');
      const admin = await (await request(`${adminUrl}/admin/replicas`)).body.text();
      await gw.close();
      for (const s of [text, JSON.stringify(res.headers), admin, lines.join('\n')]) assert.ok(!s.includes('replica-secret'), 'the replica key leaked');
    } finally {
      await plain.close();
      await a.close();
    }
  });
});
