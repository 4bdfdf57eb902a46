import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { stringify } from 'yaml';
import { startFleet, type SimFleet } from '../../bench/sim/index.js';
import { spawnGateway, type SpawnedGateway } from '../helpers/spawn-gateway.js';
import { waitFor } from '../store/redis-server.js';

const MODEL = 'google/gemma-4-31B-it';

describe('config reload (SIGHUP, file change) without dropping a stream', () => {
  let fleet: SimFleet;
  let g: SpawnedGateway;
  const file = join(mkdtempSync(join(tmpdir(), 'wr-reload-')), 'warmroute.yaml');
  const write = (names: number[], extra: Record<string, unknown> = {}) =>
    writeFileSync(file, stringify({ upstreams: names.map((i) => ({ name: `r${i}`, url: fleet.urls[i] })), health: { probeIntervalMs: 200 }, ...extra }));
  const replicas = async () =>
    ((await (await request(`${g.adminUrl}/admin/replicas`)).body.json()) as { replicas: { name: string; state: string }[] }).replicas;
  const chat = (key: string, extra: Record<string, unknown> = {}) => request(`${g.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-session-id': key },
    body: JSON.stringify({ model: MODEL, max_tokens: 2, messages: [{ role: 'user', content: `hello from ${key}` }], ...extra }),
  });

  before(async () => {
    fleet = await startFleet({ replicas: 3, outputTokens: { min: 80, max: 80 } });
    write([0, 1]);
    g = await spawnGateway([], ['--config', file]);
  });
  after(async () => {
    await g.stop();
    await fleet.close();
  });

  it('adds and removes replicas, applies new settings, rejects a bad file with every error, and keeps open streams', async () => {
    assert.deepEqual((await replicas()).map((r) => r.name), ['r0', 'r1']);
    // A stream open across every reload below: ~80 tokens of decode.
    const long = await chat('long', { stream: true, max_tokens: undefined });
    assert.equal(long.statusCode, 200);
    const longText = long.body.text();

    write([0, 1, 2], { headers: { route: false } });
    g.child.kill('SIGHUP');
    // Two reloads: the signal's at once, and the file watcher's once the write has settled. Waited
    // for here: the next write, if it came first, would fold the watcher's into its own, and how
    // many reloads were counted would depend on how fast the machine got there.
    const reloads = async () => (await (await request(`${g.adminUrl}/metrics`)).body.text()).match(/^warmroute_config_reloads_total\{result="applied"\} (\d+)$/m)?.[1];
    await waitFor('the reloads by signal and by file change', async () => (await reloads()) === '2', 5_000);
    await waitFor('r2 to join', async () => (await replicas()).some((r) => r.name === 'r2' && r.state === 'up'), 5_000);
    const res = await chat('after-reload');
    await res.body.text();
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['x-warmroute-route'], undefined, 'headers.route: false applies to the next request');

    // A bad file: rejected, each problem logged, the running configuration stays.
    writeFileSync(file, stringify({ upstreams: [{ url: 'ftp://nope' }], limits: { maxRetries: 99 }, health: { probeIntervalMs: 0 } }));
    await waitFor('the rejection', () => g.logs.some((l) => l.msg?.startsWith('config reload rejected')), 5_000);
    const problems = g.logs.filter((l) => l.msg === 'config reload: invalid');
    assert.ok(problems.length >= 3, JSON.stringify(problems));
    assert.ok(problems.every((l) => l.level === 50));
    assert.deepEqual((await replicas()).map((r) => r.name), ['r0', 'r1', 'r2']);

    // A file change that removes r0: drained, then gone.
    write([1, 2], { headers: { route: false } });
    await waitFor('r0 to leave', async () => !(await replicas()).some((r) => r.name === 'r0'), 5_000);
    await waitFor('its log line (buffered)', () => g.logs.some((l) => l.msg === 'replica left the fleet' && l.replica === 'r0'), 3_000);
    const metrics = await (await request(`${g.adminUrl}/metrics`)).body.text();
    assert.match(metrics, /warmroute_config_reloads_total\{result="applied"\} 3/);
    assert.match(metrics, /warmroute_config_reloads_total\{result="rejected"\} 1/);

    const text = await longText;
    assert.match(text, /data: \[DONE\]/, 'the stream open during the reloads finished');
    assert.ok(!text.includes('"error"'));
  });
});
