import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { request } from 'undici';
import { startReplica } from '../../bench/sim/index.js';
import { resolveConfig } from '../../src/config/load.js';
import { listAdapterDirectory, mergedSources } from '../../src/fleet/adapter-directory.js';
import { FAST } from '../sim/helpers.js';
import { chatModel, startGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';

const BASE = 'base-m';
const root = mkdtempSync(join(tmpdir(), 'warmroute-adapter-dir-'));
after(() => rmSync(root, { recursive: true, force: true }));

/** An adapter's directory as PEFT writes it (vLLM reads adapter_config.json first). */
function adapterAt(dir: string, name: string): string {
  const p = join(dir, name);
  mkdirSync(p, { recursive: true });
  writeFileSync(join(p, 'adapter_config.json'), JSON.stringify({ peft_type: 'LORA', r: 8, base_model_name_or_path: BASE }));
  return p;
}

const metricsText = async (adminUrl: string) => (await request(`${adminUrl}/metrics`)).body.text();

describe('adapters.directory', () => {
  it('lists each subdirectory with an adapter_config.json, under the replicas’ path; leaves out the rest, saying why', async () => {
    const dir = join(root, 'listing');
    adapterAt(dir, 'support-v3');
    adapterAt(dir, 'sales');
    mkdirSync(join(dir, 'half-uploaded'), { recursive: true });
    adapterAt(dir, '.partial');
    adapterAt(dir, 'bad name');
    writeFileSync(join(dir, 'README'), 'not an adapter');
    symlinkSync(adapterAt(join(root, 'elsewhere'), 'linked'), join(dir, 'linked'));
    const got = await listAdapterDirectory(dir, '/mnt/adapters/');
    assert.deepEqual(got.adapters, { linked: '/mnt/adapters/linked', sales: '/mnt/adapters/sales', 'support-v3': '/mnt/adapters/support-v3' });
    assert.deepEqual(got.skipped.map((s) => s.name).sort(), ['bad name', 'half-uploaded']);
    await assert.rejects(listAdapterDirectory(join(root, 'missing'), '/x'));
    // A name also in adapters.sources is the source's.
    const o = resolveConfig({ upstreams: [{ url: 'http://127.0.0.1:1' }], adapters: { sources: { sales: '/elsewhere/sales' } } }).adapters;
    assert.deepEqual(mergedSources(o, got.adapters).sources, { ...got.adapters, sales: '/elsewhere/sales' });
    // directory.base is the base of each listed adapter that adapters.bases does not name.
    const based = resolveConfig({ upstreams: [{ url: 'http://127.0.0.1:1' }], adapters: { directory: { path: '/mnt/adapters', base: 'llama-8b' }, bases: { sales: 'qwen-7b' } } }).adapters;
    assert.deepEqual(mergedSources(based, got.adapters).bases, { linked: 'llama-8b', sales: 'qwen-7b', 'support-v3': 'llama-8b' });
  });

  it('its adapters load on demand like adapters.sources; one added later is loadable after a rescan; an unreadable directory keeps the last list, loudly', async () => {
    const dir = join(root, 'served');
    adapterAt(dir, 'a1');
    const sim = await startReplica({ ...FAST, name: 'r1', model: BASE, maxLoras: 2, runtimeLoraUpdating: true, checkLoraPaths: true });
    const g = await startGateway([], {
      upstreams: [{ name: 'r1', url: sim.url }],
      health: { statsIntervalMs: 50 },
      // The gateway and the replica see the volume at the same path here: listPath left empty.
      adapters: { directory: { path: dir, rescanMs: 100 } },
    });
    try {
      await waitFor('LoRA slots scraped', async () => ((await (await request(`${g.adminUrl}/admin/replicas`)).body.json()) as any).replicas.every((r: any) => r.lora !== null), 5_000);
      assert.equal((await chatModel(g, 'a1')).status, 200);
      // Not there yet: a 404 naming it.
      assert.equal((await chatModel(g, 'a2')).status, 404);
      adapterAt(dir, 'a2');
      await waitFor('a2 listed', () => g.logs.some((l) => l.msg === 'adapters.directory listed' && l.added?.includes('a2')), 3_000);
      const a2 = await chatModel(g, 'a2');
      assert.equal(a2.status, 200, JSON.stringify(a2.json));
      assert.equal(sim.loraCalls().load, 2);
      const models = (await (await request(`${g.url}/v1/models`)).body.json()) as any;
      assert.ok(models.data.some((m: any) => m.id === 'a2'));
      let text = await metricsText(g.adminUrl);
      assert.match(text, /^warmroute_adapter_directory_adapters 2$/m);
      // The volume goes away: the adapters listed stay, the failure is counted and warned about once.
      rmSync(dir, { recursive: true, force: true });
      await waitFor('a failed listing', async () => /warmroute_adapter_directory_scans_total\{outcome="failed"\} [1-9]/.test(await metricsText(g.adminUrl)), 3_000);
      assert.equal(g.logs.filter((l) => l.level === 40 && /adapters.directory unreadable/.test(l.msg)).length, 1);
      text = await metricsText(g.adminUrl);
      assert.match(text, /^warmroute_adapter_directory_adapters 2$/m);
      assert.equal((await chatModel(g, 'a2')).status, 200);
    } finally {
      await g.close();
      await sim.close();
    }
  });

  it('a reload that sets it lists the directory at once', async () => {
    const dir = join(root, 'reloaded');
    adapterAt(dir, 'late');
    const sim = await startReplica({ ...FAST, name: 'r1', model: BASE, maxLoras: 2, runtimeLoraUpdating: true, checkLoraPaths: true });
    const g = await startGateway([], { upstreams: [{ name: 'r1', url: sim.url }], health: { statsIntervalMs: 50 } });
    try {
      await waitFor('LoRA slots scraped', async () => ((await (await request(`${g.adminUrl}/admin/replicas`)).body.json()) as any).replicas.every((r: any) => r.lora !== null), 5_000);
      assert.equal((await chatModel(g, 'late')).status, 404);
      g.gw.reconfigure(resolveConfig({ upstreams: [{ name: 'r1', url: sim.url }], health: { statsIntervalMs: 50, probeIntervalMs: 200 }, outlier: { baseEjectionMs: 300 }, listen: { host: '127.0.0.1', port: 0 }, admin: { host: '127.0.0.1', port: 0 }, adapters: { directory: { path: dir, rescanMs: 0 } } }));
      await waitFor('late listed', () => g.logs.some((l) => l.msg === 'adapters.directory listed'), 3_000);
      assert.equal((await chatModel(g, 'late')).status, 200);
    } finally {
      await g.close();
      await sim.close();
    }
  });
});
