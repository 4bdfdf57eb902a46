// Issue 23's silent failures on real vLLM: a tool call cut by its max_tokens is caught (and the
// guard prevents it), and a replica started without prefix caching is flagged beside the fleet.
// One extra replica (index 8): the fleet's flags plus vLLM's tool calling (hermes parser) and
// --no-enable-prefix-caching; stopped at the end.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { freePort } from '../../bench/lib/procs.js';
import { SERVED_MODEL, startReplicaProcess, stopReplicaProcess, waitHealthy, type ReplicaState } from '../../bench/real/vllm-replica.js';
import type { FleetState } from '../../bench/real/fleet-vllm.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';
import { realFleet } from './real-fleet.js';

const EXTRA = 8;
// Integer and boolean arguments: with the function named, vLLM constrains the random-weight
// model's output to the schema, so the JSON closes within 256 tokens but not within 8.
const TOOLS = [{ type: 'function', function: { name: 'set_table', description: 'Book', parameters: { type: 'object', properties: { seats: { type: 'integer' }, outside: { type: 'boolean' } }, required: ['seats', 'outside'] } } }];
const toolTurn = (maxTokens: number) => ({
  model: SERVED_MODEL, stream: true, max_tokens: maxTokens, tools: TOOLS, tool_choice: { type: 'function', function: { name: 'set_table' } },
  messages: [{ role: 'user', content: 'Two seats outside, please.' }],
});

async function post(g: TestGateway, body: unknown) {
  const res = await request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.statusCode, headers: res.headers, text: await res.body.text() };
}
const scrape = async (g: TestGateway) => (await request(`${g.adminUrl}/metrics`)).body.text();
const truncatedCount = (metrics: string) => Number(/^warmroute_tool_calls_truncated_total\{[^}]*\} (\S+)/m.exec(metrics)?.[1] ?? 0);

describe('real vLLM: tool calls cut by max_tokens, and a replica without prefix caching', () => {
  let fleet: FleetState;
  let extra: ReplicaState;
  before(async () => {
    fleet = await realFleet();
    extra = startReplicaProcess({ index: EXTRA, port: await freePort(), kvEvents: { pub: await freePort(), replay: await freePort() } }, {
      extraArgs: ['--enable-auto-tool-choice', '--tool-call-parser', 'hermes', '--no-enable-prefix-caching'],
    });
    await waitHealthy(extra);
  });
  after(async () => { await stopReplicaProcess(EXTRA); });

  it('guard off: a named tool call cut at max_tokens 8 ends on its length and is counted, marked and logged', async () => {
    const g = await startGateway([extra.url], { tools: { minMaxTokens: 0 } });
    try {
      const cut = await post(g, toolTurn(8));
      assert.equal(cut.status, 200, cut.text);
      assert.match(cut.text, /"finish_reason":"length"/, 'vLLM cut the call on its length');
      await waitFor("warmroute_tool_calls_truncated_total at 1", async () => truncatedCount(await scrape(g)) === 1, 10_000);
      await waitFor("toolCallTruncated in the access line", () => g.logs.some((l) => l.toolCallTruncated === true), 5_000);
      assert.ok(g.logs.some((l) => l.level === 40 && /tool call cut/.test(l.msg)), 'a warn line says so');
    } finally {
      await g.close();
    }
  });

  it('guard on (tools.minMaxTokens 256, the default): the same request is raised, said so, and the call comes back whole', async () => {
    const g = await startGateway([extra.url]);
    try {
      const r = await post(g, toolTurn(8));
      assert.equal(r.status, 200, r.text);
      assert.equal(r.headers['x-warmroute-adjusted'], 'max_tokens=256');
      assert.doesNotMatch(r.text, /"finish_reason":"length"/, 'no longer cut');
      assert.match(r.text, /"finish_reason":"(stop|tool_calls)"/);
      assert.equal(truncatedCount(await scrape(g)), 0);
    } finally {
      await g.close();
    }
  });

  it('the replica without prefix caching is flagged: warn line, gauge, /admin/replicas; the fleet\'s are not', async () => {
    const upstreams = [...fleet.replicas.map((r) => ({ url: r.url, name: r.name })), { url: extra.url, name: 'vllm-8' }];
    const g = await startGateway([], { upstreams, health: { statsIntervalMs: 200, probeIntervalMs: 500 } });
    try {
      const gauge = (m: string, replica: string) => Number(new RegExp(`^warmroute_replica_config_mismatch\\{[^}]*replica="${replica}"[^}]*setting="prefix_caching"[^}]*\\} (\\S+)`, 'm').exec(m)?.[1] ?? NaN);
      await waitFor("vllm-8 flagged for prefix_caching", async () => gauge(await scrape(g), "vllm-8") === 1, 30_000);
      const metrics = await scrape(g);
      for (const r of fleet.replicas) assert.notEqual(gauge(metrics, r.name), 1, `${r.name} is not flagged`);
      const admin = (await (await request(`${g.adminUrl}/admin/replicas`)).body.json()) as { replicas: { name: string; configMismatch?: { setting: string; value: string; fleet: string }[] }[] };
      const flagged = admin.replicas.find((x) => x.name === 'vllm-8')!;
      assert.deepEqual(flagged.configMismatch?.map((m) => [m.setting, m.value, m.fleet]), [['prefix_caching', 'off', 'on']]);
      for (const r of admin.replicas.filter((x) => x.name !== 'vllm-8')) assert.deepEqual(r.configMismatch ?? [], []);
      assert.ok(g.logs.some((l) => l.level === 40 && JSON.stringify(l).includes('prefix_caching')), 'a warn line names the setting');
    } finally {
      await g.close();
    }
  });
});
