// The vLLM flags warmroute's README lists: exactly what the fleet runs for warmroute, and each one
// needed — shown on one extra replica (index 9) started without any of them.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { freePort } from '../../bench/lib/procs.js';
import { SMALL_FLAGS, WARMROUTE_ENV, WARMROUTE_FLAGS, serveArgs, startReplicaProcess, stopReplicaProcess, waitHealthy } from '../../bench/real/vllm-replica.js';
import { RUN, getText, longText, postJson, realFleet } from './real-fleet.js';

describe('real vLLM: the README\'s flags', () => {
  it('the README\'s vLLM flags are exactly what the fleet runs for warmroute, and nothing else is needed', () => {
    const readme = readFileSync('README.md', 'utf8');
    const heading = '## Run it in front of vLLM';
    const section = readme.slice(readme.indexOf(heading), readme.indexOf('\n## ', readme.indexOf(heading) + 5));
    const block = [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]).find((b) => b.includes('vllm serve'))!;
    assert.ok(block, 'a vllm serve command in the section');
    const flags = [...block.matchAll(/(?:^|\s)(--[a-z-]+)/g)].map((m) => m[1]).sort();
    const env = [...block.matchAll(/(?:^|\s)([A-Z_]+)=(\S+)/g)].map((m) => `${m[1]}=${m[2]}`);
    const args = serveArgs({ index: 0, port: 1, kvEvents: { pub: 2, replay: 3 } });
    const identity = ['--model', '--served-model-name', '--host', '--port'];
    const fleetFlags = args.filter((a) => a.startsWith('--') && !identity.includes(a) && !(SMALL_FLAGS as readonly string[]).includes(a)).sort();
    assert.deepEqual(flags, fleetFlags, 'the README lists the flags the fleet runs, apart from size and identity');
    assert.deepEqual(flags, [...WARMROUTE_FLAGS, '--kv-events-config'].sort());
    assert.deepEqual(env, Object.entries(WARMROUTE_ENV).map(([k, v]) => `${k}=${v}`));
    const kv = JSON.parse(/--kv-events-config '([^']+)'/.exec(block)![1]);
    assert.deepEqual(Object.keys(kv).sort(), ['enable_kv_cache_events', 'endpoint', 'publisher', 'replay_endpoint', 'topic']);
    assert.match(kv.endpoint, /^tcp:\/\/\*:\d+$/, 'a wildcard PUB endpoint, or vLLM connects instead of binding');
  });
});

describe('real vLLM without warmroute\'s flags: each one is needed', () => {
  // One extra replica (index 9) started with none of WARMROUTE_FLAGS, no KV events and no
  // VLLM_ENABLE_RESPONSES_API_STORE; stopped at the end.
  let bare: Awaited<ReturnType<typeof startBare>> | null = null;
  before(async () => { await realFleet(); bare = await startBare(); });
  after(async () => { await stopReplicaProcess(9); });

  it('without --enable-prompt-tokens-details a warm repeat reports no cached_tokens (the cache is still used)', async () => {
    const body = { model: 'tiny-llama', max_tokens: 1, messages: [{ role: 'user', content: longText(`${RUN}-bare`) }] };
    await postJson(`${bare!.url}/v1/chat/completions`, body);
    const warm = await postJson(`${bare!.url}/v1/chat/completions`, body);
    assert.equal(warm.status, 200);
    assert.ok(warm.body.usage.prompt_tokens_details == null, JSON.stringify(warm.body.usage));
    const metrics = (await getText(`${bare!.url}/metrics`)).text;
    assert.ok(Number(/^vllm:prefix_cache_hits_total\{[^}]*\} (\S+)/m.exec(metrics)?.[1]) > 0, 'prefix hits counted all the same');
  });

  it('prefix caching is on by default in vLLM V1 (--enable-prefix-caching only says so explicitly)', async () => {
    assert.match((await getText(`${bare!.url}/metrics`)).text, /^vllm:cache_config_info\{[^}]*enable_prefix_caching="True"/m);
  });

  it('without VLLM_ENABLE_RESPONSES_API_STORE=1, store: true is ignored and the follow-up is a 404', async () => {
    const first = await postJson(`${bare!.url}/v1/responses`, { model: 'tiny-llama', input: 'hi', store: true, max_output_tokens: 2 });
    assert.equal(first.status, 200, first.text);
    const next = await postJson(`${bare!.url}/v1/responses`, { model: 'tiny-llama', input: 'again', previous_response_id: first.body.id, max_output_tokens: 2 });
    assert.equal(next.status, 404, next.text);
  });
});

async function startBare() {
  const r = startReplicaProcess({ index: 9, port: await freePort(), kvEvents: { pub: 0, replay: 0 } }, { bare: true });
  await waitHealthy(r);
  return r;
}
