// `npm run fleet:vllm -- [--replicas N] [--nice N] [--stop] [--restart I] [--lora N [--max-loras M] [--max-cpu-loras C] [--lora-preload P]] [--realtime]`:
// a fleet of real vLLM (CPU) replicas
// serving a tiny local model, left running after this script exits, described in
// ~/.cache/warmroute/fleet/vllm.json for the gateway's real-server tests and benchmarks.

import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { freePort, setGroupNice } from '../lib/procs.js';
import {
  ASR_MODEL_DIR, CACHE_DIR, MODEL_DIR, REALTIME_REPLICA, SERVED_MODEL, STATE_FILE, VENV_PYTHON, healthy, startRealtimeProcess,
  startReplicaProcess, stopNamedProcess, stopReplicaProcess, waitHealthy, type RealtimeReplicaState, type ReplicaState, type ServeOptions,
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
  /** LoRA on (`--lora N`): the adapters made for the tiny model and how the replicas serve them; absent: off. */
  lora?: LoraFleet;
  /**
   * `--realtime`: one more replica, serving a realtime transcription model on /v1/realtime. Kept out
   * of `replicas` so that whatever reads them (LLM tests, benchmarks) never sees it; absent: none.
   */
  realtime?: RealtimeReplicaState;
}

/** A fleet started with `--lora N`. */
export interface LoraFleet {
  /** Every adapter made (lora-0 ... lora-{N-1}) → its directory on this host, as vLLM's lora_path. */
  adapters: Record<string, string>;
  /** Those given to every replica at start (--lora-modules); the rest can be loaded at run time. */
  preloaded: string[];
  maxLoras: number;
  maxCpuLoras: number;
}

export interface LoraOptions { count: number; maxLoras: number; maxCpuLoras: number; preload: number }

export const ADAPTERS_DIR = join(CACHE_DIR, 'adapters', 'tiny-llama');

/** The adapters a `--lora` fleet serves, with their paths, before they are made. */
export function loraFleetOf(o: LoraOptions): LoraFleet {
  const adapters: Record<string, string> = {};
  for (let i = 0; i < o.count; i++) adapters[`lora-${i}`] = join(ADAPTERS_DIR, `lora-${i}`);
  return { adapters, preloaded: Object.keys(adapters).slice(0, o.preload), maxLoras: o.maxLoras, maxCpuLoras: o.maxCpuLoras };
}

/**
 * The flags and environment of a LoRA replica: --enable-lora with its slots, rank 8 (the
 * adapters'), the preloaded adapters, and runtime load and unload allowed (what the gateway's
 * on-demand loading calls).
 */
export function loraServeOptions(l: LoraFleet): ServeOptions {
  const modules = l.preloaded.map((name) => `${name}=${l.adapters[name]}`);
  return {
    extraArgs: ['--enable-lora', '--max-loras', String(l.maxLoras), '--max-lora-rank', '8', '--max-cpu-loras', String(l.maxCpuLoras), ...(modules.length > 0 ? ['--lora-modules', ...modules] : [])],
    extraEnv: { VLLM_ALLOW_RUNTIME_LORA_UPDATING: '1' },
  };
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

/**
 * Installs vLLM and makes the model (with LoRA, peft and the adapters; with realtime, torchvision
 * and the speech model), each only once.
 */
export function prepare(lora?: LoraFleet, realtime = false): void {
  const r = spawnSync('bash', [join(HERE, 'install-vllm.sh')], {
    stdio: 'inherit',
    env: { ...process.env, ...(lora ? { WARMROUTE_LORA: '1' } : {}), ...(realtime ? { WARMROUTE_REALTIME: '1' } : {}) },
  });
  if (r.status !== 0) throw new Error(`install-vllm.sh exited with ${r.status}`);
  if (!existsSync(join(MODEL_DIR, 'config.json'))) run(VENV_PYTHON, [join(HERE, 'make-model.py'), '--out', MODEL_DIR]);
  if (lora) run(VENV_PYTHON, [join(HERE, 'make-adapters.py'), '--model', MODEL_DIR, '--out', ADAPTERS_DIR, '--count', String(Object.keys(lora.adapters).length)]);
  if (realtime && !existsSync(join(ASR_MODEL_DIR, 'config.json'))) run(VENV_PYTHON, [join(HERE, 'make-realtime-model.py'), '--out', ASR_MODEL_DIR]);
}

/** Starts the realtime replica on a free port (at the fleet's nice) and waits for it to be healthy. */
async function startRealtime(nice: number): Promise<RealtimeReplicaState> {
  const t0 = Date.now();
  const r = startRealtimeProcess(await freePort());
  setGroupNice(r.pid, nice);
  try {
    await waitHealthy(r);
  } catch (e) {
    await stopNamedProcess(REALTIME_REPLICA);
    throw e;
  }
  return { ...r, startupMs: Date.now() - t0 };
}

async function allHealthy(s: FleetState): Promise<boolean> {
  return (await Promise.all(s.replicas.map((r) => healthy(r.url)))).every(Boolean);
}

export async function stopFleet(): Promise<number> {
  const s = readState();
  let stopped = 0;
  const count = Math.max(s?.replicas.length ?? 0, 16);
  for (let i = 0; i < count; i++) if (await stopReplicaProcess(i)) stopped++;
  if (await stopNamedProcess(REALTIME_REPLICA)) stopped++;
  rmSync(STATE_FILE, { force: true });
  return stopped;
}

/**
 * Starts `count` replicas (in parallel) unless a healthy fleet of that size already runs. `nice`:
 * set it (on a running fleet too); absent, a running fleet keeps its own and a new one gets REPLICA_NICE.
 * `realtime`: the realtime replica too, added beside a running fleet that lacks it; absent or
 * false, a running fleet keeps the one it has and a new fleet has none.
 */
export async function ensureFleet(count: number, nice?: number, lora?: LoraFleet, realtime = false): Promise<FleetState> {
  const running = readState();
  // A fleet of other LoRA settings (or none, when some are asked for) is started again.
  const sameLora = lora === undefined || JSON.stringify(running?.lora ?? null) === JSON.stringify(lora);
  if (running && running.replicas.length === count && sameLora && await allHealthy(running)) {
    let s = running;
    if (nice !== undefined) {
      applyNice(running.replicas, nice);
      if (running.realtime) setGroupNice(running.realtime.pid, nice);
      if (running.nice !== nice) s = { ...s, nice };
    }
    if (realtime && !(s.realtime && await healthy(s.realtime.url))) {
      await stopNamedProcess(REALTIME_REPLICA);
      prepare(undefined, true);
      s = { ...s, realtime: await startRealtime(s.nice ?? REPLICA_NICE) };
    }
    if (s !== running) writeState(s);
    return s;
  }
  nice ??= REPLICA_NICE;
  if (running) await stopFleet();
  prepare(lora, realtime);
  const serve = lora ? loraServeOptions(lora) : {};
  const t0 = Date.now();
  const replicas: ReplicaState[] = [];
  for (let i = 0; i < count; i++) {
    replicas.push(startReplicaProcess({ index: i, port: await freePort(), kvEvents: { pub: await freePort(), replay: await freePort() } }, serve));
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
  // After the LLM replicas are healthy, not beside them: their startupMs then measures what it
  // always did, their start alone on the machine's cores.
  let rt: RealtimeReplicaState | undefined;
  if (realtime) {
    try {
      rt = await startRealtime(nice);
    } catch (e) {
      for (let i = 0; i < count; i++) await stopReplicaProcess(i);
      throw e;
    }
  }
  const state: FleetState = { kind: 'vllm', model: SERVED_MODEL, replicas, startedAt: new Date(t0).toISOString(), startupMs, nice, ...(lora ? { lora } : {}), ...(rt ? { realtime: rt } : {}) };
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
  const r = startReplicaProcess({ index: i, port: old.port, kvEvents: { pub: ports(old.kvEvents!.endpoint), replay: ports(old.kvEvents!.replayEndpoint) } }, s.lora ? loraServeOptions(s.lora) : {});
  applyNice([r], s.nice ?? REPLICA_NICE);
  await waitHealthy(r);
  s.replicas[i] = r;
  writeState(s);
  return r;
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: {
    replicas: { type: 'string', default: '2' }, nice: { type: 'string' }, stop: { type: 'boolean' }, restart: { type: 'string' },
    lora: { type: 'string' }, 'max-loras': { type: 'string', default: '2' }, 'max-cpu-loras': { type: 'string' }, 'lora-preload': { type: 'string' },
    realtime: { type: 'boolean' },
  } });
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
  let lora: LoraFleet | undefined;
  if (values.lora !== undefined) {
    const n = Number(values.lora);
    const maxLoras = Number(values['max-loras']);
    // vLLM wants --max-cpu-loras ≥ --max-loras; by default every adapter stays on the host.
    const maxCpuLoras = Number(values['max-cpu-loras'] ?? Math.max(maxLoras, n));
    const preload = Number(values['lora-preload'] ?? Math.min(n, maxLoras));
    if (!Number.isInteger(n) || n < 1) throw new Error('--lora must be a positive integer (adapters to make)');
    if (!Number.isInteger(maxLoras) || maxLoras < 1) throw new Error('--max-loras must be a positive integer');
    if (!Number.isInteger(maxCpuLoras) || maxCpuLoras < maxLoras) throw new Error('--max-cpu-loras must be an integer ≥ --max-loras');
    if (!Number.isInteger(preload) || preload < 0 || preload > n) throw new Error('--lora-preload must be an integer from 0 to --lora');
    lora = loraFleetOf({ count: n, maxLoras, maxCpuLoras, preload });
  }
  const before = readState();
  const s = await ensureFleet(count, nice, lora, values.realtime === true);
  // The LLM replicas started now, not a realtime replica added beside a running fleet.
  const fresh = before?.startedAt !== s.startedAt;
  for (const r of s.replicas) console.log(`${r.name} ${r.url} kv-events ${r.kvEvents?.endpoint} replay ${r.kvEvents?.replayEndpoint} pid ${r.pid}`);
  console.log(fresh ? `started ${count} replica(s); healthy after ${s.startupMs.map((m) => `${(m / 1000).toFixed(1)} s`).join(', ')}` : `already running (started ${s.startedAt})`);
  if (s.lora) console.log(`LoRA: ${Object.keys(s.lora.adapters).length} adapters in ${ADAPTERS_DIR}, --max-loras ${s.lora.maxLoras}, --max-cpu-loras ${s.lora.maxCpuLoras}, preloaded ${s.lora.preloaded.join(', ') || 'none'}`);
  if (s.realtime) console.log(`realtime: ${s.realtime.name} ${s.realtime.url} (/v1/realtime, model ${s.realtime.model}) pid ${s.realtime.pid}${s.realtime.startupMs === undefined ? '' : `, healthy after ${(s.realtime.startupMs / 1000).toFixed(1)} s`}`);
  console.log(`replicas at nice ${s.nice ?? '(not set by this script)'}; state: ${STATE_FILE}`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().catch((e) => { console.error(e instanceof Error ? e.message : e); process.exit(1); });
}
