import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { startFixture, type FixtureUpstream } from '../helpers/fixture-upstream.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';

describe('prefix drift: a session that changes its own prompt early is reported', () => {
  let a: FixtureUpstream;
  let g: TestGateway;
  before(async () => {
    a = await startFixture('a');
    g = await startGateway([a.url]);
  });
  after(async () => { await g.close(); await a.close(); });

  const turn = async (session: string, messages: unknown[], extra: Record<string, unknown> = {}) => {
    const res = await request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-session-id': session }, body: JSON.stringify({ model: 'fixture-model', messages, ...extra }) });
    await res.body.text();
  };
  const drifts = async (where: string) => Number(new RegExp(`warmroute_prefix_drift_total\\{where="${where}"\\} (\\d+)`).exec(await (await request(`${g.adminUrl}/metrics`)).body.text())?.[1] ?? 0);
  const system = (time: string) => ({ role: 'system', content: `You are the clinic's voice agent. The current time is ${time}. Be brief.` });

  it('a system prompt that embeds the time: drift at the system prompt, in the metric, the log and the admin view', async () => {
    const u1 = { role: 'user', content: 'Is the clinic open?' };
    const a1 = { role: 'assistant', content: 'Yes, until six.' };
    await turn('drift-1', [system('10:00:01'), u1]);
    await turn('drift-1', [system('10:00:01'), u1, a1, { role: 'user', content: 'And tomorrow?' }]);
    assert.equal(await drifts('system'), 0, 'a growing conversation is not drift');
    await turn('drift-1', [system('10:00:09'), u1, a1, { role: 'user', content: 'And tomorrow?' }, { role: 'assistant', content: 'Eight to six.' }, { role: 'user', content: 'Thanks' }]);
    assert.equal(await drifts('system'), 1);
    const line = g.logs.find((l) => String(l.msg).startsWith('prompt drift'))!;
    assert.equal(line.where, 'system');
    assert.equal(line.message, 0);
    assert.match(line.session, /^[0-9a-f]{12}$/);
    assert.ok(!JSON.stringify(g.logs).includes('10:00:09'), 'never the prompt text');
    const admin = (await (await request(`${g.adminUrl}/admin/sessions/drift-1`)).body.json()) as { lastDrift: { where: string; message: number } };
    assert.deepEqual({ where: admin.lastDrift.where, message: admin.lastDrift.message }, { where: 'system', message: 0 });
  });

  it('reordered tools drift at the tools; an edited history message at its index', async () => {
    const msgs = [system('9:00'), { role: 'user', content: 'Book me in.' }];
    const t1 = { type: 'function', function: { name: 'book', parameters: {} } };
    const t2 = { type: 'function', function: { name: 'cancel', parameters: {} } };
    await turn('drift-2', msgs, { tools: [t1, t2] });
    await turn('drift-2', [...msgs, { role: 'assistant', content: 'For when?' }, { role: 'user', content: 'Monday' }], { tools: [t2, t1] });
    assert.equal(await drifts('tools'), 1);
    await turn('drift-3', [system('9:00'), { role: 'user', content: 'one' }, { role: 'assistant', content: 'two' }, { role: 'user', content: 'three' }]);
    await turn('drift-3', [system('9:00'), { role: 'user', content: 'one' }, { role: 'assistant', content: 'TWO (edited)' }, { role: 'user', content: 'three' }, { role: 'assistant', content: 'four' }]);
    assert.equal(await drifts('history'), 1);
    const admin = (await (await request(`${g.adminUrl}/admin/sessions/drift-3`)).body.json()) as { lastDrift: { where: string; message: number } };
    assert.equal(admin.lastDrift.message, 2);
    assert.equal(g.logs.filter((l) => String(l.msg).startsWith('prompt drift')).length, 1, 'three drifts counted, one line logged (at most one a minute)');
  });
});
