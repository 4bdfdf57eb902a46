import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { startReplica, type SimReplica } from '../../bench/sim/index.js';
import { auditFleet } from '../../src/fleet/config-audit.js';
import { UNREAD_CONFIG, type ReplicaConfig } from '../../src/fleet/replica-config.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';

const base: ReplicaConfig = { prefixCaching: true, blockSize: 16, cacheDtype: 'auto', kvCapacityTokens: 100_000, models: { m: { maxModelLen: 8192, root: 'org/m' } } };
const settingsOf = (r: Map<string, { setting: string }[]>) => Object.fromEntries([...r].map(([k, v]) => [k, v.map((m) => m.setting).sort()]));

describe('fleet configuration audit: who differs from the fleet', () => {
  it('a replica unlike the majority is flagged on each setting it differs on; the majority is not', () => {
    const configs = new Map<string, ReplicaConfig>([
      ['a', base],
      ['b', base],
      ['c', { ...base, blockSize: 32, cacheDtype: 'fp8', kvCapacityTokens: 50_000, models: { m: { maxModelLen: 4096, root: 'org/other' } } }],
      ['d', { ...base, prefixCaching: false, kvCapacityTokens: 105_000 }],
    ]);
    assert.deepEqual(settingsOf(auditFleet(configs)), { c: ['block_size', 'cache_dtype', 'kv_capacity', 'max_model_len', 'model'], d: ['prefix_caching'] });
  });

  it('two replicas that disagree are both flagged (no majority); unread settings and other served names are not compared', () => {
    const two = new Map<string, ReplicaConfig>([['a', base], ['b', { ...base, blockSize: 32 }]]);
    assert.deepEqual(settingsOf(auditFleet(two)), { a: ['block_size'], b: ['block_size'] });
    const partial = new Map<string, ReplicaConfig>([
      ['a', base],
      ['b', { ...UNREAD_CONFIG }],
      ['c', { ...base, models: { other: { maxModelLen: 1024, root: 'org/x' } } }],
    ]);
    assert.deepEqual(settingsOf(auditFleet(partial)), {});
  });
});

describe('fleet configuration audit, live: simulated replicas started misconfigured', () => {
  let replicas: SimReplica[];
  let g: TestGateway;
  before(async () => {
    replicas = await Promise.all([
      startReplica({ name: 'good-0' }),
      startReplica({ name: 'good-1' }),
      startReplica({ name: 'no-cache', enablePrefixCaching: false }),
    ]);
    g = await startGateway(replicas.map((r) => r.url), { health: { statsIntervalMs: 200, probeIntervalMs: 200 } });
  });
  after(async () => {
    await g.close();
    await Promise.all(replicas.map((r) => r.close()));
  });

  const metricsText = async () => (await request(`${g.adminUrl}/metrics`)).body.text();
  const nameOf = (i: number) => new URL(replicas[i].url).host;

  it('at startup: a warn line naming the setting, the gauge at 1 (0 for the others), a field in /admin/replicas', async () => {
    await waitFor('the prefix-caching warning', () => g.logs.some((l) => l.level === 40 && l.setting === 'prefix_caching'), 5_000);
    const warns = g.logs.filter((l) => l.level === 40 && /configured unlike the fleet/.test(l.msg));
    assert.deepEqual(warns.map((l) => [l.replica, l.setting]), [[nameOf(2), 'prefix_caching']]);
    const text = await metricsText();
    assert.match(text, new RegExp(`warmroute_replica_config_mismatch\\{replica="${nameOf(2)}",setting="prefix_caching"\\} 1`));
    assert.match(text, new RegExp(`warmroute_replica_config_mismatch\\{replica="${nameOf(0)}",setting="prefix_caching"\\} 0`));
    const admin = (await (await request(`${g.adminUrl}/admin/replicas`)).body.json()) as { replicas: { name: string; configMismatch: { setting: string }[]; config: ReplicaConfig }[] };
    const byName = new Map(admin.replicas.map((r) => [r.name, r]));
    assert.deepEqual(byName.get(nameOf(2))!.configMismatch.map((m) => m.setting), ['prefix_caching']);
    assert.deepEqual(byName.get(nameOf(0))!.configMismatch, []);
    assert.equal(byName.get(nameOf(0))!.config.blockSize, 16);
  });

  it('a replica that joins with another block size, cache dtype and weights under the same served name is flagged when it joins', async () => {
    const odd = await startReplica({ name: 'odd', blockSize: 32, kvBlocks: 12_288, cacheDtype: 'fp8', root: 'someone/else' });
    replicas.push(odd);
    g.gw.fleet.membership.join({ name: new URL(odd.url).host, url: odd.url, weight: 1 }, { upstream: 'odd', kind: 'static' });
    const name = new URL(odd.url).host;
    const flagged = () => g.logs.filter((l) => l.level === 40 && l.replica === name && /configured unlike the fleet/.test(l.msg)).map((l) => l.setting as string).sort();
    await waitFor('the joined replica to be flagged', () => flagged().length >= 3, 5_000);
    const settings = flagged();
    assert.deepEqual(settings, ['block_size', 'cache_dtype', 'model']);
    const text = await metricsText();
    for (const s of settings) assert.match(text, new RegExp(`warmroute_replica_config_mismatch\\{replica="${name}",setting="${s}"\\} 1`));
    assert.match(text, new RegExp(`warmroute_replica_config_mismatch\\{replica="${nameOf(0)}",setting="block_size"\\} 0`), 'the majority stays unflagged');
  });
});
