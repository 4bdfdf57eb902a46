/**
 * The Grafana dashboard (deploy/grafana/warmroute.json) queries only metrics that exist: every
 * warmroute_* name on a gateway's /metrics after a request has gone through it, every vllm:* name
 * on a (simulated) vLLM replica's /metrics.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { request } from 'undici';
import { DEFAULT_MODEL, startReplica } from '../../bench/sim/index.js';
import { startGateway } from '../helpers/gateway.js';

interface Panel { type: string; title: string; description?: string; panels?: Panel[]; targets?: { expr: string; refId: string; legendFormat?: string }[] }

const dashboard = JSON.parse(readFileSync('deploy/grafana/warmroute.json', 'utf8')) as { title: string; uid: string; panels: Panel[]; templating: { list: { name: string }[] } };
const panels = dashboard.panels.flatMap((p) => [p, ...(p.panels ?? [])]).filter((p) => p.type !== 'row');
const exprs = panels.flatMap((p) => p.targets ?? []).map((t) => t.expr);
/** Metric names a query reads, histogram series reduced to their family. */
const namesIn = (prefix: RegExp) => [...new Set(exprs.flatMap((e) => e.match(prefix) ?? []).map((n) => n.replace(/_(bucket|sum|count)$/, '')))];

describe('the Grafana dashboard', () => {
  it('shows what the issue asks for, each panel explained', () => {
    const titles = panels.map((p) => p.title.toLowerCase()).join(' | ');
    for (const want of ['ttft', 'where the time', 'gateway vs replica', 'route decisions', 'hit rate', 'replica load', 'health', 'shed', 'store', 'drift', 'interactive vs batch']) {
      assert.ok(titles.includes(want), `no panel about ${want}: ${titles}`);
    }
    for (const p of panels) {
      assert.ok(p.description && p.description.length > 20, `${p.title}: no description`);
      assert.ok((p.targets ?? []).length > 0, `${p.title}: no query`);
    }
    assert.ok(dashboard.templating.list.some((v) => v.name === 'datasource'));
    assert.ok(exprs.some((e) => e.includes('vllm:prefix_cache_hits_total')) && exprs.some((e) => e.includes('warmroute_cached_tokens_total')), 'hit rate from both sides');
  });

  it('every series it queries exists from the first scrape, before any request, KV-event ones included with events off', async () => {
    const sim = await startReplica();
    const g = await startGateway([sim.url]);
    try {
      const replicaSeen = async () => /^warmroute_replica_up\{replica="[^"]+"\} 1$/m.test(await (await request(`${g.adminUrl}/metrics`)).body.text());
      for (let i = 0; i < 100 && !(await replicaSeen()); i++) await new Promise((r) => setTimeout(r, 50));
      const gateway = await (await request(`${g.adminUrl}/metrics`)).body.text();
      // Made by the first request of each (replica, route, outcome): no set of them is known before.
      const perRequest = new Set(['warmroute_requests_total']);
      const absent = namesIn(/warmroute_[a-z_]+/g).filter((n) => !perRequest.has(n) && !new RegExp(`^${n}(_bucket|_sum|_count)?(\\{| )`, 'm').test(gateway));
      assert.deepEqual(absent, []);
    } finally {
      await g.close();
      await sim.close();
    }
  });

  it('every metric it queries exists on /metrics after a request', async () => {
    const sim = await startReplica({ frontendMs: 0.5, stepBaseMs: 2, prefillMsPerToken: 0.001 });
    const g = await startGateway([sim.url]);
    try {
      const res = await request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-session-id': 'dash' }, body: JSON.stringify({ model: DEFAULT_MODEL, stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'hello' }] }) });
      assert.equal(res.statusCode, 200);
      await res.body.text();
      const gateway = await (await request(`${g.adminUrl}/metrics`)).body.text();
      const vllm = await (await request(`${sim.url}/metrics`)).body.text();
      const ours = namesIn(/warmroute_[a-z_]+/g);
      const theirs = namesIn(/vllm:[a-z_:]+/g);
      assert.ok(ours.length >= 15 && theirs.length >= 3, `${ours.length} + ${theirs.length} metrics`);
      for (const n of ours) assert.match(gateway, new RegExp(`^# TYPE ${n} `, 'm'), `the dashboard queries ${n}, which the gateway does not export`);
      for (const n of theirs) assert.match(vllm, new RegExp(`^# TYPE ${n} `, 'm'), `the dashboard queries ${n}, which vLLM does not export`);
    } finally {
      await g.close();
      await sim.close();
    }
  });
});
