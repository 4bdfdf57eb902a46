// POST /v1/responses input items the simulator must refuse as vLLM's request validation does
// (400 "Bad Request", FastAPI's handler), so a gateway test cannot pass on input vLLM rejects.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FAST, postJson, replica } from './helpers.js';

const badRequest = (res: { status: number; json: any }, what: string) => {
  assert.equal(res.status, 400, what);
  assert.equal(res.json?.error?.type, 'Bad Request', what);
  assert.equal(res.json?.error?.code, 400, what);
};

test('/v1/responses: a function_call_output without call_id is a 400, not a tool message with an empty id', async (t) => {
  const r = await replica(t, FAST);
  for (const item of [{ type: 'function_call_output', output: '{"ok":true}' }, { type: 'function_call_output', call_id: 7, output: 'x' }]) {
    const res = await postJson(r.url, '/v1/responses', { input: [{ role: 'user', content: 'Book it.' }, item] });
    badRequest(res, JSON.stringify(item));
    assert.match(res.json.error.message, /'missing', 'loc': 'body\.input\.1\.call_id'/);
  }
  assert.equal(r.counters().requests, 0, 'nothing reached the engine');
  const ok = await postJson(r.url, '/v1/responses', { input: [{ type: 'function_call_output', call_id: 'call_1', output: '{"ok":true}' }] });
  assert.equal(ok.status, 200);
});

test('/v1/responses: a message role outside user/assistant/system/developer is a 400', async (t) => {
  const r = await replica(t, FAST);
  for (const role of ['tool', 'model', 'User', '', 3]) {
    const res = await postJson(r.url, '/v1/responses', { input: [{ role, content: 'hi' }] });
    badRequest(res, `role ${JSON.stringify(role)}`);
    assert.match(res.json.error.message, /'literal_error', 'loc': 'body\.input\.0\.role', 'msg': "Input should be 'user', 'assistant', 'system' or 'developer'"/);
  }
  const missing = await postJson(r.url, '/v1/responses', { input: [{ type: 'message', content: 'hi' }] });
  badRequest(missing, 'no role');
  assert.match(missing.json.error.message, /'missing', 'loc': 'body\.input\.0\.role'/);
  assert.equal(r.counters().requests, 0, 'nothing reached the engine');
  for (const role of ['user', 'assistant', 'system', 'developer']) {
    const res = await postJson(r.url, '/v1/responses', { input: [{ role, content: 'hi' }, { role: 'user', content: 'And?' }] });
    assert.equal(res.status, 200, role);
  }
});
