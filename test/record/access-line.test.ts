import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { chatBody, fixtureAndGateway, waitForAccess } from '../helpers/gateway.js';

const nulls = (line: Record<string, unknown>) => Object.keys(line).filter((k) => line[k] === null);

describe('the access line carries only the fields that have a value', () => {
  const env = fixtureAndGateway();

  it('a /v1/models line: no null fields, no routing or timing fields it never reached', async () => {
    const res = await request(`${env.g.url}/v1/models`);
    await res.body.text();
    const line = (await waitForAccess(env.g, (ls) => ls.some((l) => l.path === '/v1/models'))).filter((l) => l.path === '/v1/models').at(-1)!;
    assert.deepEqual(nulls(line), []);
    assert.equal(line.status, 200);
    assert.equal(line.outcome, 'complete');
    for (const absent of ['replica', 'route', 'session', 'sessionSource', 'model', 'turn', 'call', 'ttftMs', 'overheadMs', 'routeMs', 'promptTokens', 'cachedTokens', 'err', 'upstreamError']) {
      assert.equal(absent in line, false, `${absent} is absent: ${JSON.stringify(line)}`);
    }
  });

  it('a keyed stream: every hop and the usage are there, and still no null', async () => {
    const res = await request(`${env.g.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-session-id': 'access-line-1' }, body: chatBody() });
    await res.body.text();
    const line = (await waitForAccess(env.g, (ls) => ls.some((l) => l.path === '/v1/chat/completions'))).filter((l) => l.path === '/v1/chat/completions').at(-1)!;
    assert.deepEqual(nulls(line), []);
    for (const present of ['replica', 'route', 'session', 'sessionSource', 'model', 'ttftMs', 'overheadMs', 'parseMs', 'routeMs', 'queueMs', 'connectMs', 'upstreamHeadersMs', 'upstreamFirstTokenMs', 'streamMs', 'promptTokens', 'cachedTokens', 'completionTokens', 'done']) {
      assert.ok(line[present] !== undefined, `${present} is there: ${JSON.stringify(line)}`);
    }
    assert.equal(line.done, true);
  });

  it('a request the edge refused: its error code, no null', async () => {
    const res = await request(`${env.g.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"model":' });
    await res.body.text();
    assert.equal(res.statusCode, 400);
    const line = (await waitForAccess(env.g, (ls) => ls.some((l) => l.status === 400))).filter((l) => l.status === 400).at(-1)!;
    assert.deepEqual(nulls(line), []);
    assert.equal(line.err, 'invalid_json');
    assert.equal('replica' in line, false);
  });
});
