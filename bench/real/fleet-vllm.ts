// `npm run fleet:vllm -- [--replicas N] [--stop] [--restart I]`: a fleet of real vLLM (CPU) replicas
// serving a tiny local model, left running after this script exits, described in
// ~/.cache/warmroute/fleet/vllm.json for the gateway's real-server tests and benchmarks.

import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { freePort } from '../lib/procs.js';
import {
  MODEL_DIR, SERVED_MODEL, STATE_FILE, VENV_PYTHON, healthy, startReplicaProcess, stopReplicaProcess, waitHealthy,
  type ReplicaState,
} from './vllm-replica.js';

const HERE = dirname(fileURLToPath(import.meta.url));

export interface FleetState {
  kind: 'vllm';
  model: string;
  replicas: ReplicaState[];
  startedAt: string;
  startupMs: number[];
}

export function readState(): FleetState | null {
  if (!existsSync(STATE_FILE)) return null;
  try { return JSON.parse(readFileSync(STATE_FILE, 'utf8')) as FleetState; } catch { return null; }
}

const writeState = (s: FleetState) => writeFileSync(STATE_FILE, `${JSON.stringify(s, null, 2)}\n`);

function run(cmd: string, args: string[]): void {
  const r = spawnSync(cmd, args, { stdio: 'inherit' });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited with ${r.status}`);
}

/** Installs vLLM and makes the model, each only once. */
export function prepare(): void {
  run('bash', [join(HERE, 'install-vllm.sh')]);
  if (!existsSync(join(MODEL_DIR, 'config.json'))) run(VENV_PYTHON, [join(HERE, 'make-model.py'), '--out', MODEL_DIR]);
}

async function allHealthy(s: FleetState): Promise<boolean> {
  return (await Promise.all(s.replicas.map((r) => healthy(r.url)))).every(Boolean);
}

export async function stopFleet(): Promise<number> {
  const s = readState();
  let stopped = 0;
  const count = Math.max(s?.replicas.length ?? 0, 16);
  for (let i = 0; i < count; i++) if (await stopReplicaProcess(i)) stopped++;
  rmSync(STATE_FILE, { force: true });
  return stopped;
}

/** Starts `count` replicas (in parallel) unless a healthy fleet of that size already runs. */
export async function ensureFleet(count: number): Promise<FleetState> {
  const running = readState();
  if (running && running.replicas.length === count && await allHealthy(running)) return running;
  if (running) await stopFleet();
  prepare();
  const t0 = Date.now();
  const replicas: ReplicaState[] = [];
  for (let i = 0; i < count; i++) {
    replicas.push(startReplicaProcess({ index: i, port: await freePort(), kvEvents: { pub: await freePort(), replay: await freePort() } }));
  }
  const startupMs: number[] = [];
  try {
    await Promise.all(replicas.map(async (r, i) => { await waitHealthy(r); startupMs[i] = Date.now() - t0; }));
  } catch (e) {
    for (let i = 0; i < count; i++) await stopReplicaProcess(i);
    throw e;
  }
  const state: FleetState = { kind: 'vllm', model: SERVED_MODEL, replicas, startedAt: new Date(t0).toISOString(), startupMs };
  writeState(state);
  return state;
}

/** Restarts replica i on the same ports (a real restart: empty KV cache, new process start time). */
export async function restartReplica(i: number): Promise<ReplicaState> {
  const s = readState();
  if (!s || !s.replicas[i]) throw new Error(`no replica ${i} in ${STATE_FILE}`);
  const old = s.replicas[i];
  await stopReplicaProcess(i);
  const ports = (e: string) => Number(e.slice(e.lastIndexOf(':') + 1));
  const r = startReplicaProcess({ index: i, port: old.port, kvEvents: { pub: ports(old.kvEvents!.endpoint), replay: ports(old.kvEvents!.replayEndpoint) } });
  await waitHealthy(r);
  s.replicas[i] = r;
  writeState(s);
  return r;
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { replicas: { type: 'string', default: '2' }, stop: { type: 'boolean' }, restart: { type: 'string' } } });
  if (values.stop) {
    console.log(`stopped ${await stopFleet()} replica process group(s)`);
    return;
  }
  if (values.restart !== undefined) {
    const r = await restartReplica(Number(values.restart));
    console.log(`restarted ${r.name} at ${r.url} (pid ${r.pid})`);
    return;
  }
  const count = Number(values.replicas);
  if (!Number.isInteger(count) || count < 1) throw new Error('--replicas must be a positive integer');
  const t0 = Date.now();
  const s = await ensureFleet(count);
  const fresh = Date.now() - t0 > 5_000;
  for (const r of s.replicas) console.log(`${r.name} ${r.url} kv-events ${r.kvEvents?.endpoint} replay ${r.kvEvents?.replayEndpoint} pid ${r.pid}`);
  console.log(fresh ? `started ${count} replica(s); healthy after ${s.startupMs.map((m) => `${(m / 1000).toFixed(1)} s`).join(', ')}` : `already running (started ${s.startedAt})`);
  console.log(`state: ${STATE_FILE}`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().catch((e) => { console.error(e instanceof Error ? e.message : e); process.exit(1); });
}
