// `npm run fleet:vllm -- [--replicas N] [--nice N] [--stop] [--restart I]`: a fleet of real vLLM (CPU) replicas
// serving a tiny local model, left running after this script exits, described in
// ~/.cache/warmroute/fleet/vllm.json for the gateway's real-server tests and benchmarks.

import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { freePort, setGroupNice } from '../lib/procs.js';
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
  /** The replicas' CPU priority (see REPLICA_NICE); absent in a state written before it was set. */
  nice?: number;
}

/**
 * The replicas' nice by default. On this machine the routers compared and the replicas share two
 * cores, and a CPU engine's forward pass does not yield: a router then waits for the CPU inside
 * its own writes (a single-threaded one stops relaying every stream meanwhile). Measured on the
 * 2-replica fleet under pressure: warmroute's request write (its `connect` hop) took 15–29 ms on
 * average at nice 0 and 0.8 ms at 5. In production a router does not share cores with the
 * engines; at nice 5 the fleet yields to whatever else runs, so every router compared has the
 * CPU it needs, and still gets all that is left. `--nice 0` measures the contended case.
 */
export const REPLICA_NICE = 5;

/** Every replica's process group (and session) to `nice`; they keep it through restarts. */
function applyNice(replicas: readonly ReplicaState[], nice: number): void {
  for (const r of replicas) setGroupNice(r.pid, nice);
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

/**
 * Starts `count` replicas (in parallel) unless a healthy fleet of that size already runs. `nice`:
 * set it (on a running fleet too); absent, a running fleet keeps its own and a new one gets REPLICA_NICE.
 */
export async function ensureFleet(count: number, nice?: number): Promise<FleetState> {
  const running = readState();
  if (running && running.replicas.length === count && await allHealthy(running)) {
    if (nice === undefined) return running;
    applyNice(running.replicas, nice);
    if (running.nice !== nice) writeState({ ...running, nice });
    return { ...running, nice };
  }
  nice ??= REPLICA_NICE;
  if (running) await stopFleet();
  prepare();
  const t0 = Date.now();
  const replicas: ReplicaState[] = [];
  for (let i = 0; i < count; i++) {
    replicas.push(startReplicaProcess({ index: i, port: await freePort(), kvEvents: { pub: await freePort(), replay: await freePort() } }));
  }
  // Before the engine processes are forked: they inherit it.
  applyNice(replicas, nice);
  const startupMs: number[] = [];
  try {
    await Promise.all(replicas.map(async (r, i) => { await waitHealthy(r); startupMs[i] = Date.now() - t0; }));
  } catch (e) {
    for (let i = 0; i < count; i++) await stopReplicaProcess(i);
    throw e;
  }
  const state: FleetState = { kind: 'vllm', model: SERVED_MODEL, replicas, startedAt: new Date(t0).toISOString(), startupMs, nice };
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
  applyNice([r], s.nice ?? REPLICA_NICE);
  await waitHealthy(r);
  s.replicas[i] = r;
  writeState(s);
  return r;
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { replicas: { type: 'string', default: '2' }, nice: { type: 'string' }, stop: { type: 'boolean' }, restart: { type: 'string' } } });
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
  const nice = values.nice === undefined ? undefined : Number(values.nice);
  if (nice !== undefined && (!Number.isInteger(nice) || nice < -20 || nice > 19)) throw new Error('--nice must be an integer from -20 to 19');
  const t0 = Date.now();
  const s = await ensureFleet(count, nice);
  const fresh = Date.now() - t0 > 5_000;
  for (const r of s.replicas) console.log(`${r.name} ${r.url} kv-events ${r.kvEvents?.endpoint} replay ${r.kvEvents?.replayEndpoint} pid ${r.pid}`);
  console.log(fresh ? `started ${count} replica(s); healthy after ${s.startupMs.map((m) => `${(m / 1000).toFixed(1)} s`).join(', ')}` : `already running (started ${s.startedAt})`);
  console.log(`replicas at nice ${s.nice ?? '(not set by this script)'}; state: ${STATE_FILE}`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().catch((e) => { console.error(e instanceof Error ? e.message : e); process.exit(1); });
}
