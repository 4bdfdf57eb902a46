/** Redis Sentinel and Redis Cluster made of throwaway redis-server children on free loopback ports. */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Cluster } from 'ioredis';
import { freePort, startRedis, waitFor, type RedisChild } from './redis-server.js';

function child(args: string[]): ChildProcess {
  const c = spawn('redis-server', args, { stdio: 'ignore' });
  process.once('exit', () => c.kill('SIGKILL'));
  return c;
}

async function stop(c: ChildProcess): Promise<void> {
  if (c.exitCode !== null || c.signalCode !== null) return;
  const exited = new Promise((r) => c.once('exit', r));
  c.kill('SIGKILL');
  await exited;
}

const answers = (port: number) => spawnSync('redis-cli', ['-p', String(port), 'ping'], { encoding: 'utf8' }).stdout.trim() === 'PONG';

export interface SentinelSetup { master: RedisChild; url: string; close(): Promise<void> }

/** A master and one sentinel watching it as `wr`; the URL names the sentinel, never the master. */
export async function startSentinel(): Promise<SentinelSetup> {
  const master = await startRedis();
  const port = await freePort();
  const conf = join(mkdtempSync(join(tmpdir(), 'wr-sentinel-')), 'sentinel.conf');
  writeFileSync(conf, `port ${port}\nbind 127.0.0.1\nsentinel monitor wr 127.0.0.1 ${master.port} 1\nsentinel down-after-milliseconds wr 5000\n`);
  const s = child([conf, '--sentinel']);
  try {
    await waitFor('the sentinel', () => answers(port), 5_000);
  } catch (e) {
    await Promise.allSettled([stop(s), master.kill()]);
    throw e;
  }
  return { master, url: `redis-sentinel://127.0.0.1:${port}/wr`, async close() { await stop(s); await master.kill(); } };
}

export interface ClusterSetup { ports: number[]; url: string; client(): Cluster; close(): Promise<void> }

/** Three masters sharing the 16,384 slots (no replicas). */
export async function startCluster(): Promise<ClusterSetup> {
  const dir = mkdtempSync(join(tmpdir(), 'wr-cluster-'));
  const ports = [await freePort(), await freePort(), await freePort()];
  const nodes = ports.map((p) => child(['--port', String(p), '--bind', '127.0.0.1', '--cluster-enabled', 'yes', '--cluster-config-file', join(dir, `nodes-${p}.conf`), '--save', '', '--appendonly', 'no']));
  for (const p of ports) await waitFor(`cluster node ${p}`, () => answers(p), 5_000);
  const made = spawnSync('redis-cli', ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '0', '--cluster-yes'], { encoding: 'utf8' });
  if (made.status !== 0) throw new Error(`redis-cli --cluster create: ${made.stdout}${made.stderr}`);
  await waitFor('cluster_state:ok', () => ports.every((p) => spawnSync('redis-cli', ['-p', String(p), 'cluster', 'info'], { encoding: 'utf8' }).stdout.includes('cluster_state:ok')), 10_000);
  const clients: Cluster[] = [];
  return {
    ports,
    url: `redis-cluster://127.0.0.1:${ports[0]},127.0.0.1:${ports[1]}`,
    client() {
      const c = new Cluster([{ host: '127.0.0.1', port: ports[0] }]);
      c.on('error', () => {});
      clients.push(c);
      return c;
    },
    async close() {
      for (const c of clients) c.disconnect();
      await Promise.all(nodes.map(stop));
    },
  };
}
