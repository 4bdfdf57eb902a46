import assert from 'node:assert/strict';
import { test } from 'node:test';
import { chat, FAST, postJson, replica, text, user, waitFor } from './helpers.js';

const MODEL = 'google/gemma-4-31B-it';

test('/v1/models and /health look like vLLM', async (t) => {
  const r = await replica(t, { ...FAST, maxModelLen: 8192 });
  const models = await (await fetch(`${r.url}/v1/models`)).json();
  assert.equal(models.object, 'list');
  assert.equal(models.data.length, 1);
  assert.equal(models.data[0].id, MODEL);
  assert.equal(models.data[0].object, 'model');
  assert.equal(models.data[0].owned_by, 'vllm');
  assert.equal(models.data[0].max_model_len, 8192);
  const health = await fetch(`${r.url}/health`);
  assert.equal(health.status, 200);
  assert.equal(await health.text(), '');
});

test('bad requests get vLLM error bodies and statuses', async (t) => {
  const r = await replica(t, { ...FAST, maxModelLen: 1024 });
  const shape = (json: any, type: string, code: number) => {
    assert.deepEqual(Object.keys(json), ['error']);
    assert.deepEqual(Object.keys(json.error), ['message', 'type', 'param', 'code']);
    assert.equal(json.error.type, type);
    assert.equal(json.error.code, code);
  };
  const badJson = await postJson(r.url, '/v1/chat/completions', '{"messages": [');
  assert.equal(badJson.status, 400);
  shape(badJson.json, 'Bad Request', 400);
  assert.match(badJson.json.error.message, /json_invalid/);

  const missing = await postJson(r.url, '/v1/chat/completions', { model: MODEL });
  assert.equal(missing.status, 400);
  shape(missing.json, 'Bad Request', 400);
  assert.match(missing.json.error.message, /messages/);

  const noPrompt = await postJson(r.url, '/v1/completions', { model: MODEL });
  assert.equal(noPrompt.status, 400);
  assert.match(noPrompt.json.error.message, /prompt/);

  const unknown = await postJson(r.url, '/v1/chat/completions', { model: 'gpt-4', messages: user('hi') });
  assert.equal(unknown.status, 404);
  shape(unknown.json, 'NotFoundError', 404);
  assert.equal(unknown.json.error.param, 'model');
  assert.equal(unknown.json.error.message, 'The model `gpt-4` does not exist. Valid aliases: google/gemma-4-31B-it.');

  const long = await postJson(r.url, '/v1/chat/completions', { messages: user(text(1100)) });
  assert.equal(long.status, 400);
  shape(long.json, 'BadRequestError', 400);
  assert.equal(long.json.error.param, 'input_tokens');
  assert.match(long.json.error.message, /maximum context length is 1024 tokens/);

  const maxTokens = await postJson(r.url, '/v1/chat/completions', { messages: user('hi'), max_tokens: 1020 });
  assert.equal(maxTokens.status, 400);
  assert.equal(maxTokens.json.error.param, 'max_tokens');

  const mediaType = await postJson(r.url, '/v1/chat/completions', { messages: user('hi') }, { 'content-type': 'text/plain' });
  assert.equal(mediaType.status, 400);
  assert.match(mediaType.json.error.message, /application\/json/);

  const salt = await postJson(r.url, '/v1/chat/completions', { messages: user('hi'), cache_salt: '' });
  assert.equal(salt.status, 400);

  assert.equal(r.counters().rejected, 8);
  assert.equal(r.counters().requests, 0);
  assert.equal((await fetch(`${r.url}/v1/nothing`)).status, 404);
});

function sample(metrics: string, name: string, labels: Record<string, string> = {}): number {
  for (const line of metrics.split('\n')) {
    const m = /^([^{ ]+)\{([^}]*)\} (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const l = Object.fromEntries([...m[2].matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    // vllm:cache_config_info carries the cache config labels and engine, not model_name.
    if ((name !== 'vllm:cache_config_info' && l.model_name !== MODEL) || l.engine !== '0') continue;
    if (Object.entries(labels).every(([k, v]) => l[k] === v)) return Number(m[3]);
  }
  return Number.NaN;
}

test('/metrics uses vLLM V1 names and labels and counts what happened', async (t) => {
  const r = await replica(t, FAST);
  const messages = user(text(100));
  await chat(r.url, { messages, max_tokens: 3 });
  const second = await chat(r.url, { messages, max_tokens: 3 });
  const res = await fetch(`${r.url}/metrics`);
  assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
  const m = await res.text();
  const c = r.counters();
  assert.equal(sample(m, 'vllm:num_requests_running'), 0);
  assert.equal(sample(m, 'vllm:num_requests_waiting'), 0);
  assert.equal(sample(m, 'vllm:kv_cache_usage_perc'), 0);
  assert.equal(sample(m, 'vllm:prefix_cache_queries_total'), c.prefixCacheQueries);
  assert.equal(sample(m, 'vllm:prefix_cache_hits_total'), second.usage!.prompt_tokens_details!.cached_tokens);
  assert.equal(sample(m, 'vllm:prompt_tokens_total'), 2 * second.usage!.prompt_tokens);
  assert.equal(sample(m, 'vllm:generation_tokens_total'), 6);
  assert.equal(sample(m, 'vllm:request_success_total', { finished_reason: 'length' }), 2);
  assert.equal(sample(m, 'vllm:time_to_first_token_seconds_count'), 2);
  assert.equal(sample(m, 'vllm:time_to_first_token_seconds_bucket', { le: '+Inf' }), 2);
  // vLLM's TTFT buckets, in order.
  const les = [...m.matchAll(/^vllm:time_to_first_token_seconds_bucket\{[^}]*le="([^"]+)"/gm)].map((x) => x[1]);
  assert.deepEqual(les.slice(0, 8), ['0.001', '0.005', '0.01', '0.02', '0.04', '0.06', '0.08', '0.1']);
  assert.equal(les[les.length - 2], '2560.0');
  assert.equal(sample(m, 'vllm:cache_config_info', { block_size: '16', num_gpu_blocks: '24576', enable_prefix_caching: 'True' }), 1);
  assert.match(m, /^# TYPE vllm:prefix_cache_hits_total counter$/m);
  assert.match(m, /^# TYPE vllm:time_to_first_token_seconds histogram$/m);
});

test('/metrics gauges follow the running batch and KV usage', async (t) => {
  const r = await replica(t, { ...FAST, stepBaseMs: 5, outputTokens: { min: 80, max: 80 } });
  const inFlight = [0, 1, 2].map((i) => chat(r.url, { messages: user(text(200, `g${i}`)) }));
  // All three admitted, not just six tokens made: on a busy machine the third can arrive after
  // the first two have decoded three tokens each.
  await waitFor(() => r.counters().running === 3 && r.counters().generationTokens >= 6, 2000, 'three decoding');
  const m = await (await fetch(`${r.url}/metrics`)).text();
  assert.equal(sample(m, 'vllm:num_requests_running'), 3);
  assert.ok(sample(m, 'vllm:kv_cache_usage_perc') > 0);
  await Promise.all(inFlight);
});
