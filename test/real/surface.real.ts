// warmroute in front of real vLLM (CPU) replicas: the HTTP surface passes through as vLLM
// answers it, and the simulator (bench/sim) answers the same way where a router can tell.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { startReplica, type SimReplica } from '../../bench/sim/index.js';
import type { FleetState } from '../../bench/real/fleet-vllm.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { RUN, contentOf, getText, postJson, realFleet, sseEvents } from './real-fleet.js';

const keys = (o: object) => Object.keys(o).sort();

describe('real vLLM: HTTP surface through warmroute', () => {
  let f: FleetState;
  let g: TestGateway;
  let sim: SimReplica;
  let direct: string;
  before(async () => {
    f = await realFleet();
    g = await startGateway([], { upstreams: f.replicas.map((r) => ({ url: r.url, name: r.name })) });
    // The fleet's --max-model-len, so limit errors carry the same numbers.
    sim = await startReplica({ model: f.model, maxModelLen: 4608, frontendMs: 0, stepBaseMs: 1, prefillMsPerToken: 0.001 });
    direct = f.replicas[0].url;
  });
  after(async () => {
    await g?.close();
    await sim?.close();
  });

  it('/v1/models lists the served model, with the fields vLLM gives each entry (the simulator too)', async () => {
    const gw = JSON.parse((await getText(`${g.url}/v1/models`)).text);
    const real = JSON.parse((await getText(`${direct}/v1/models`)).text);
    const simModels = JSON.parse((await getText(`${sim.url}/v1/models`)).text);
    // A fleet started with LoRA lists its adapters too (each with its base as `parent`): the base model is the one entry without one.
    assert.deepEqual(gw.data.filter((m: any) => !m.parent).map((m: any) => m.id), [f.model]);
    const base = (list: any) => list.data.find((m: any) => m.id === f.model);
    // vLLM mints a new permission id and `created` per call; the rest is the replica's own entry.
    const stable = (m: any) => ({ ...m, created: 0, permission: m.permission.map((p: any) => ({ ...p, id: '', created: 0 })) });
    assert.deepEqual(stable(base(gw)), stable(base(real)), 'the gateway serves vLLM\'s own entry');
    assert.deepEqual(keys(simModels), keys(real));
    assert.deepEqual(keys(simModels.data[0]), keys(base(real)), 'the simulator\'s model entry has vLLM\'s fields');
  });

  it('/v1/completions through warmroute gives what the replica gives directly (temperature 0)', async () => {
    const body = { model: f.model, prompt: `completion ${RUN} ${'the a of '.repeat(20)}`, max_tokens: 8, temperature: 0, seed: 7 };
    const viaGw = await postJson(`${g.url}/v1/completions`, body);
    const real = await postJson(`${direct}/v1/completions`, body);
    assert.equal(viaGw.status, 200, viaGw.text);
    assert.equal(viaGw.body.choices[0].text, real.body.choices[0].text);
    assert.equal(viaGw.body.usage.completion_tokens, 8);
    const simRes = await postJson(`${sim.url}/v1/completions`, body);
    assert.deepEqual(keys(simRes.body), keys(real.body), 'the simulator\'s completion has vLLM\'s top-level fields');
    assert.deepEqual(keys(simRes.body.choices[0]), keys(real.body.choices[0]), 'and choice fields');
    assert.deepEqual(keys(simRes.body.usage), keys(real.body.usage), 'and usage fields');
  });

  it('/v1/responses through warmroute: vLLM\'s response object, and the simulator\'s has the same fields', async () => {
    const body = { model: f.model, input: `responses ${RUN}`, max_output_tokens: 3, temperature: 0 };
    const viaGw = await postJson(`${g.url}/v1/responses`, body);
    const real = await postJson(`${direct}/v1/responses`, body);
    const simRes = await postJson(`${sim.url}/v1/responses`, body);
    assert.equal(viaGw.status, 200, viaGw.text);
    assert.deepEqual(keys(viaGw.body), keys(real.body));
    assert.match(real.body.id, /^resp_[0-9a-f]{16}$/);
    assert.match(simRes.body.id, /^resp_[0-9a-f]{16}$/, 'the simulator\'s ids look like vLLM\'s');
    assert.deepEqual(keys(simRes.body), keys(real.body), 'top-level fields');
    assert.deepEqual(keys(simRes.body.output[0]), keys(real.body.output[0]), 'output item fields');
    for (const part of ['input_tokens_details', 'output_tokens_details'] as const) {
      assert.deepEqual(simRes.body.usage[part], real.body.usage[part].cached_tokens === undefined ? real.body.usage[part] : { ...real.body.usage[part], cached_tokens: simRes.body.usage[part].cached_tokens }, `usage.${part}`);
    }
  });

  it('a streamed chat through warmroute has the same content, finish and usage as a direct one (temperature 0)', async () => {
    const body = { model: f.model, stream: true, stream_options: { include_usage: true }, temperature: 0, seed: 11, max_tokens: 24, messages: [{ role: 'user', content: `stream ${RUN}` }] };
    const viaGw = await postJson(`${g.url}/v1/chat/completions`, body, { 'x-session-id': `stream-${RUN}` });
    const real = await postJson(`${direct}/v1/chat/completions`, body);
    assert.equal(viaGw.status, 200);
    assert.match(String(viaGw.headers['content-type']), /^text\/event-stream/);
    const a = sseEvents(viaGw.text);
    const b = sseEvents(real.text);
    assert.equal(a.at(-1), '[DONE]');
    // vLLM puts several tokens in one chunk when its output loop falls behind, so chunk boundaries
    // differ run to run even at temperature 0; the text, the finish and the usage do not.
    assert.equal(contentOf(a), contentOf(b), `the same text; through warmroute:\n${viaGw.text}`);
    const tail = (es: typeof a) => es.filter((e) => e !== '[DONE]' && (e.choices?.[0]?.finish_reason || e.usage)).map((e) => JSON.stringify([(e as any).choices?.[0]?.finish_reason, (e as any).usage?.completion_tokens, (e as any).usage?.prompt_tokens]));
    assert.deepEqual(tail(a), tail(b), 'the same finish reason and usage');
    // Apart from id and created, the opening and closing events' bytes are vLLM's.
    const norm = (e: unknown) => JSON.stringify(e).replace(/"id":"[^"]*"/g, '"id":""').replace(/"created":\d+/g, '"created":0');
    assert.equal(norm(a[0]), norm(b[0]), 'the role chunk as vLLM sent it');
    assert.equal(norm(a.at(-2)), norm(b.at(-2)), 'the usage chunk as vLLM sent it');
    const simEv = sseEvents((await postJson(`${sim.url}/v1/chat/completions`, body)).text);
    const firstKeys = (es: typeof a) => keys(es[0] as object);
    assert.deepEqual(firstKeys(simEv), firstKeys(b), 'the simulator\'s opening chunk has vLLM\'s fields');
    const usageOf = (es: typeof a) => (es.find((e) => e !== '[DONE]' && e.usage) as any).usage;
    assert.deepEqual(keys(usageOf(simEv)), keys(usageOf(b)), 'the simulator\'s usage chunk has vLLM\'s fields');
    assert.deepEqual(keys(usageOf(simEv).prompt_tokens_details), keys(usageOf(b).prompt_tokens_details));
  });

  // Errors only the replica can find: the gateway forwards the request and vLLM's answer as is.
  const tooLong = 'the a of '.repeat(3000);
  const passedThrough: [string, string, Record<string, unknown>][] = [
    ['max_tokens below 1 (a check while serving)', '/v1/chat/completions', { model: 'tiny-llama', max_tokens: -3, messages: [{ role: 'user', content: 'hi' }] }],
    ['max_tokens not an integer (request validation)', '/v1/chat/completions', { model: 'tiny-llama', max_tokens: 'x', messages: [{ role: 'user', content: 'hi' }] }],
    ['a prompt longer than max_model_len', '/v1/chat/completions', { model: 'tiny-llama', messages: [{ role: 'user', content: tooLong }] }],
    ['an unknown stored response (404)', '/v1/responses', { model: 'tiny-llama', input: 'hi', previous_response_id: `resp_${RUN.replace(/\W/g, '')}` }],
  ];
  for (const [what, path, body] of passedThrough) {
    it(`vLLM's error for ${what} passes through warmroute unchanged, and the simulator answers it alike`, async () => {
      const viaGw = await postJson(`${g.url}${path}`, body);
      const real = await postJson(`${direct}${path}`, body);
      assert.ok(real.status === 400 || real.status === 404, real.text);
      assert.equal(viaGw.status, real.status, viaGw.text);
      assert.equal(viaGw.text, real.text, 'the same bytes');
      const simBody = { ...body, model: f.model };
      const simRes = await postJson(`${sim.url}${path}`, simBody);
      assert.equal(simRes.status, real.status, simRes.text);
      assert.deepEqual(simRes.body, real.body, 'the simulator\'s body is vLLM\'s');
    });
  }

  // Errors warmroute finds itself, before any replica (it needs the messages to identify the
  // session, and knows which models the fleet serves): its own errors, as documented; the simulator
  // still answers them as vLLM does, for tests that reach it directly.
  const answeredByGateway: [string, Record<string, unknown>, number, string][] = [
    ['messages not a list', { model: 'tiny-llama', messages: 'bad' }, 400, 'invalid_request'],
    ['an unknown model', { model: 'no-such-model', messages: [{ role: 'user', content: 'hi' }] }, 404, 'model_not_found'],
  ];
  for (const [what, body, status, code] of answeredByGateway) {
    it(`warmroute answers ${what} itself (${status} ${code}); the simulator gives vLLM's body for it`, async () => {
      const viaGw = await postJson(`${g.url}/v1/chat/completions`, body);
      const real = await postJson(`${direct}/v1/chat/completions`, body);
      assert.equal(real.status, status, real.text);
      assert.equal(viaGw.status, status, viaGw.text);
      assert.equal(viaGw.body.error.code, code);
      const simRes = await postJson(`${sim.url}/v1/chat/completions`, { ...body, model: body.model === 'tiny-llama' ? f.model : body.model });
      assert.equal(simRes.status, real.status);
      assert.deepEqual(simRes.body, real.body, 'the simulator\'s body is vLLM\'s');
    });
  }

  // Bodies the gateway must read before routing: it answers them with its own errors; the
  // simulator answers them with vLLM's (apart from the JSON parser's wording in ctx.error).
  const unreadable: [string, string, string, number, string][] = [
    ['a body that is not JSON', 'application/json', '{"model":"tiny-llama","messages":[{"role":"user","content":"hi"}]', 400, 'invalid_json'],
    ['a body that is not application/json', 'text/plain', '{}', 415, 'unsupported_media_type'],
  ];
  for (const [what, contentType, raw, gwStatus, code] of unreadable) {
    it(`warmroute answers ${what} itself (${gwStatus} ${code}); the simulator gives vLLM's error for it`, async () => {
      const send = async (base: string) => {
        const res = await request(`${base}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': contentType }, body: raw });
        return { status: res.statusCode, body: JSON.parse(await res.body.text()) };
      };
      const viaGw = await send(g.url);
      const real = await send(direct);
      const simRes = await send(sim.url);
      assert.equal(viaGw.status, gwStatus);
      assert.equal(viaGw.body.error.code, code);
      assert.equal(real.status, 400);
      assert.equal(simRes.status, real.status);
      const withoutCtx = (b: any) => ({ ...b.error, message: b.error.message.replace(/, 'ctx': \{'error': .*\}\}$/, '}') });
      assert.deepEqual(withoutCtx(simRes.body), withoutCtx(real.body), 'the simulator\'s body is vLLM\'s');
    });
  }
});
