import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { startReplica, type SimReplica } from '../../bench/sim/index.js';
import { accessLines, simTurn, startGateway, waitForAccess, type TestGateway } from '../helpers/gateway.js';

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

async function get(url: string, method: 'GET' | 'POST' | 'DELETE' = 'GET'): Promise<{ status: number; body: any }> {
  const res = await request(url, { method });
  return { status: res.statusCode, body: await res.body.json() };
}

function assertOpenAIError(body: any, code: string): void {
  assert.deepEqual(Object.keys(body), ['error']);
  assert.deepEqual(Object.keys(body.error).sort(), ['code', 'message', 'param', 'type']);
  assert.equal(body.error.code, code);
}

describe('the admin API', () => {
  let replicas: SimReplica[];
  let g: TestGateway;
  before(async () => {
    replicas = await Promise.all([0, 1].map((i) => startReplica({}, i)));
    g = await startGateway(replicas.map((r) => r.url));
  });
  after(async () => {
    await g.close();
    await Promise.all(replicas.map((r) => r.close()));
  });

  it('/admin and / list every endpoint the admin port serves', async () => {
    for (const path of ['/admin', '/']) {
      const { status, body } = await get(`${g.adminUrl}${path}`);
      assert.equal(status, 200);
      const listed = (body.endpoints as { method: string; path: string; summary: string }[]).map((e) => `${e.method} ${e.path}`);
      for (const want of ['GET /metrics', 'GET /healthz', 'GET /readyz', 'GET /admin/replicas', 'POST /admin/replicas/:name/drain', 'POST /admin/replicas/:name/undrain',
        'GET /admin/routing', 'GET /admin/sessions/:key', 'DELETE /admin/sessions/:key', 'GET /admin/responses/:id']) {
        assert.ok(listed.includes(want), `${want} in ${listed.join(', ')}`);
      }
      assert.ok(body.endpoints.every((e: { summary: string }) => e.summary.length > 0));
    }
  });

  it('answers unknown paths and missing things in OpenAI\'s error shape', async () => {
    const unknown = await get(`${g.adminUrl}/admin/nope?x=1`);
    assert.equal(unknown.status, 404);
    assertOpenAIError(unknown.body, 'not_found');
    assert.match(unknown.body.error.message, /GET \/admin\/nope .*GET \/admin lists the endpoints/);
    const noSession = await get(`${g.adminUrl}/admin/sessions/nobody`, 'DELETE');
    assert.equal(noSession.status, 404);
    assertOpenAIError(noSession.body, 'session_not_found');
    const noReplica = await get(`${g.adminUrl}/admin/replicas/nope/drain`, 'POST');
    assertOpenAIError(noReplica.body, 'replica_not_found');
  });

  it('a drain answers its times in ISO 8601, like /admin/replicas', async () => {
    const name = (await get(`${g.adminUrl}/admin/replicas`)).body.replicas[1].name as string;
    const drained = await get(`${g.adminUrl}/admin/replicas/${encodeURIComponent(name)}/drain`, 'POST');
    assert.equal(drained.status, 202);
    assert.match(drained.body.drain.startedAt, ISO);
    assert.ok(drained.body.drain.finishedAt === null || ISO.test(drained.body.drain.finishedAt));
    const listed = (await get(`${g.adminUrl}/admin/replicas`)).body.replicas[1];
    assert.match(listed.drain.startedAt, ISO);
    assert.equal((await get(`${g.adminUrl}/admin/replicas/${encodeURIComponent(name)}/undrain`, 'POST')).status, 202);
  });

  it('a keyless session is found from the conversation tag its access line shows; a keyed one from its session tag', async () => {
    const messages = [{ role: 'system', content: 'You are a voice agent for a dentist.' }, { role: 'user', content: 'Can I move my appointment?' }];
    const keyless = await simTurn(g, messages);
    assert.equal(keyless.status, 200);
    const [line] = (await waitForAccess(g, (ls) => ls.some((l) => l.conversation !== undefined))).filter((l) => l.conversation !== undefined);
    assert.match(line.conversation, /^[0-9a-f]{12}$/);
    assert.equal(line.session, undefined, 'a keyless line carries no session tag');
    const found = await get(`${g.adminUrl}/admin/sessions/${line.conversation}`);
    assert.equal(found.status, 200, JSON.stringify(found.body));
    assert.equal(found.body.keyless, true);
    assert.equal(found.body.replica, keyless.replica);
    assert.match(found.body.since, ISO);
    assert.ok(!('key' in found.body), 'the placement key is not shown');

    // Its later turns (past the second user message) keep a record of their own: the line's tag finds that one.
    const later = [...messages, { role: 'assistant', content: 'Sure, which day?' }, { role: 'user', content: 'Thursday afternoon, please.' }];
    const second = await simTurn(g, later);
    assert.equal(second.status, 200);
    const laterLines = (await waitForAccess(g, (ls) => ls.filter((l) => l.conversation !== undefined).length >= 2)).filter((l) => l.conversation !== undefined);
    const laterTag = laterLines[laterLines.length - 1].conversation as string;
    assert.notEqual(laterTag, line.conversation, 'past its opening a conversation is told apart from other callers who opened alike');
    const foundLater = await get(`${g.adminUrl}/admin/sessions/${laterTag}`);
    assert.equal(foundLater.status, 200, JSON.stringify(foundLater.body));
    assert.equal(foundLater.body.keyless, true);
    assert.equal(foundLater.body.replica, second.replica);

    await simTurn(g, messages, { session: 'call-42' });
    const keyed = accessLines(g.logs).find((l) => l.session !== null && l.session !== undefined)!;
    assert.equal(keyed.conversation, undefined, 'a keyed request carries its session tag only');
    const byTag = await get(`${g.adminUrl}/admin/sessions/${keyed.session}`);
    assert.equal(byTag.status, 200);
    assert.equal(byTag.body.key, 'call-42');
    assert.equal((await get(`${g.adminUrl}/admin/sessions/${keyed.session}`, 'DELETE')).status, 200);
    assert.equal((await get(`${g.adminUrl}/admin/sessions/call-42`)).status, 404);
  });
});
