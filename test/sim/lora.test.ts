import assert from 'node:assert/strict';
import { test } from 'node:test';
import { chat, FAST, postJson, replica, user, waitFor } from './helpers.js';

const LORA = { ...FAST, maxLoras: 1, loraModules: { a: '/adapters/a', b: '/adapters/b' } };

/** The series of vllm:lora_requests_info with the largest value: the replica's state now. */
function loraInfo(metrics: string): Record<string, string> | null {
  let best: { v: number; labels: string } | null = null;
  for (const m of metrics.matchAll(/^vllm:lora_requests_info\{([^}]*)\} (\S+)$/gm)) {
    const v = Number(m[2]);
    if (best === null || v > best.v) best = { v, labels: m[1] };
  }
  if (best === null) return null;
  return Object.fromEntries([...best.labels.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
}

test('adapters are listed in /v1/models with their base model as parent, and answer under their own name', async (t) => {
  const r = await replica(t, { ...LORA, model: 'base-m' });
  const models = (await (await fetch(`${r.url}/v1/models`)).json()) as { data: { id: string; parent: string | null; root: string }[] };
  assert.deepEqual(models.data.map((m) => [m.id, m.parent]), [['base-m', null], ['a', 'base-m'], ['b', 'base-m']]);
  assert.equal(models.data[1].root, '/adapters/a');
  const res = await chat(r.url, { model: 'a', messages: user('hi') });
  assert.equal(res.status, 200);
  assert.equal(res.chunks[0].model, 'a');
  const unknown = await postJson(r.url, '/v1/chat/completions', { model: 'c', messages: user('hi') });
  assert.equal(unknown.status, 404);
});

/**
 * A replica of `maxLoras` slots, slowed while the queue is looked at so that the first request is
 * still running when the others arrive: one request of adapter a running, then one of b sent.
 */
async function aRunningThenB(t: Parameters<typeof replica>[0], maxLoras: number) {
  const r = await replica(t, { ...LORA, maxLoras, outputTokens: { min: 40, max: 40 } });
  r.fault({ kind: 'slow', factor: 20 });
  const t0 = performance.now();
  const first = chat(r.url, { model: 'a', messages: user('first of a') });
  await waitFor(() => r.counters().running === 1, 2000, 'a running');
  const tb = performance.now();
  const other = chat(r.url, { model: 'b', messages: user('one of b') });
  return { r, t0, first, tb, other };
}

test('a request for another adapter waits for a slot while max_loras adapters run; one of a running adapter does not', async (t) => {
  const { r, t0, first, tb, other } = await aRunningThenB(t, 1);
  await waitFor(() => r.counters().requests === 2, 2000, 'b in');
  const ta = performance.now();
  const same = chat(r.url, { model: 'a', messages: user('second of a') });
  await waitFor(() => r.counters().running === 2 && r.counters().waiting === 1, 4000, 'second a running beside the first, b waiting');
  const info = loraInfo(await (await fetch(`${r.url}/metrics`)).text());
  assert.deepEqual(info, { max_lora: '1', running_lora_adapters: 'a', waiting_lora_adapters: 'b' });
  r.clearFaults('slow');
  const [a1, b, a2] = await Promise.all([first, other, same]);
  const a1End = t0 + a1.chunkTimes[a1.chunkTimes.length - 1];
  // b's first token only after both requests of a were done; the second a started before the first ended.
  assert.ok(tb + b.ttftMs! > a1End, 'b waited for the slot');
  assert.ok(ta + a2.ttftMs! < a1End, 'a second request of a running adapter did not wait');
  assert.ok(tb + b.ttftMs! > ta + a2.chunkTimes[a2.chunkTimes.length - 1], 'b waited for every request of a');
});

test('with a free slot a second adapter runs at once beside the first', async (t) => {
  const { r, t0, first, tb, other } = await aRunningThenB(t, 2);
  await waitFor(() => r.counters().running === 2, 4000, 'b running beside a');
  r.clearFaults('slow');
  const [a1, b] = await Promise.all([first, other]);
  assert.ok(tb + b.ttftMs! < t0 + a1.chunkTimes[a1.chunkTimes.length - 1]);
});

test('adapters load and unload at run time when allowed, and not otherwise', async (t) => {
  const off = await replica(t, LORA);
  assert.equal((await postJson(off.url, '/v1/load_lora_adapter', { lora_name: 'c', lora_path: '/adapters/c' })).status, 404);
  const r = await replica(t, { ...LORA, runtimeLoraUpdating: true, loraLoadMs: 1 });
  assert.equal((await postJson(r.url, '/v1/load_lora_adapter', { lora_name: 'c' })).status, 400);
  assert.equal((await postJson(r.url, '/v1/load_lora_adapter', { lora_name: 'c', lora_path: '/adapters/c' })).status, 200);
  assert.equal((await postJson(r.url, '/v1/load_lora_adapter', { lora_name: 'c', lora_path: '/adapters/c' })).status, 400);
  const ids = async () => ((await (await fetch(`${r.url}/v1/models`)).json()) as { data: { id: string }[] }).data.map((m) => m.id);
  assert.ok((await ids()).includes('c'));
  assert.equal((await chat(r.url, { model: 'c', messages: user('hi') })).status, 200);
  assert.equal((await postJson(r.url, '/v1/unload_lora_adapter', { lora_name: 'c' })).status, 200);
  assert.equal((await postJson(r.url, '/v1/unload_lora_adapter', { lora_name: 'c' })).status, 404);
  assert.ok(!(await ids()).includes('c'));
  assert.equal((await postJson(r.url, '/v1/chat/completions', { model: 'c', messages: user('hi') })).status, 404);
});

test('lora_requests_info keeps earlier label sets, the current one with the largest value', async (t) => {
  const r = await replica(t, { ...LORA, outputTokens: { min: 3, max: 3 } });
  await chat(r.url, { model: 'a', messages: user('x') });
  r.fault({ kind: 'slow', factor: 50 });
  const busy = chat(r.url, { model: 'b', messages: user('y') });
  await waitFor(() => r.counters().running === 1, 2000, 'b running');
  const text = await (await fetch(`${r.url}/metrics`)).text();
  r.clearFaults('slow');
  await busy;
  assert.equal(loraInfo(text)?.running_lora_adapters, 'b');
  const after = await (await fetch(`${r.url}/metrics`)).text();
  assert.ok([...after.matchAll(/^vllm:lora_requests_info\{/gm)].length >= 2);
  assert.equal(loraInfo(after)?.running_lora_adapters, '');
});
