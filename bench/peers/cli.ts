// npm run bench:peers — the voice workload, the same sessions, through warmroute and the routers
// users would pick instead (SGLang's, vLLM's, LiteLLM's proxy, nginx, round-robin), one at a time
// on one fleet, in one run. Writes bench/out/peers-<preset>-*.json and -latest.md; prints the table.

import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createProgress } from '../voice/progress.js';
import type { WorkloadOptions } from '../voice/workload.js';
import { runPeers, type PeersOptions } from './bench.js';
import { simFleet, upstreamFleet, vllmFleet, VLLM_FLEET_FILE, type PeerFleet } from './fleet.js';
import { peersReport } from './markdown.js';
import { nginxBinary, PEERS_VENV } from './routers.js';
import { PEER_STRATEGIES, strategyNamed } from './strategies.js';

const USAGE = `usage: npm run bench:peers -- [flags]

  --fleet sim|vllm         the simulator (default; started and stopped here), or the real vLLM fleet of
                           ${VLLM_FLEET_FILE} (npm run fleet:vllm), used read-only
  --upstream URL           a replica to use as it is (repeat for each); instead of --fleet
  --pressure               KV caches small against the sessions' prompts (issue 16's workload; on the
                           simulator via --kv-blocks, on a real fleet by sizing the agents to its capacity)
  --peers LIST             comma-separated, in order (${PEER_STRATEGIES.map((s) => s.name).join(',')})
  --replicas N             simulated replicas (4)
  --sessions N, --turns N, --groups N, --system-tokens A-B, --kv-blocks N, --seed N
                           override the preset's workload / simulator knobs
  --max-tokens N           cap every answer (real fleets: 16)
  --max-duration-s N       per router: no new turn after this (sim 300, real 240)
  --request-timeout-s N    per request (60)
  --rounds N               run every router N times, each round in a rotated order, figures pooled
                           (sim 1, real 3: a shared machine's busy minute then falls on all alike)
  --probe N                tiny requests each way for the added-latency probe (sim 40, real 20)
  --out DIR                output directory (bench/out)

Peers come from ${PEERS_VENV} (bench/peers/install.sh installs them, pinned) and ${nginxBinary()}.`;

interface Preset {
  name: string;
  /** Served-model tokens per workload token (real fleets; 1 on the simulator). */
  tokenRatio?: number;
  workload: Partial<WorkloadOptions>;
  kvBlocks?: number;
  maxTokens: number | null;
  tools: boolean;
  probeN: number;
  rounds: number;
  maxDurationS: number;
}

const SIM: Preset = { name: 'sim', workload: {}, maxTokens: null, tools: true, probeN: 40, rounds: 1, maxDurationS: 300 };
// Issue 16's measured pressure case: 48 sessions × 10 turns, 12 agents with 3–6K-token prompts, 2,500 blocks.
const SIM_PRESSURE: Preset = { ...SIM, name: 'sim-pressure', workload: { sessions: 48, turns: 10, groups: 12, systemTokens: [3000, 6000] }, kvBlocks: 2500 };
// Two CPU cores for the whole fleet: few sessions, short answers, no tools (a random-weight model
// calls none). Prompt sizes are in the served model's tokens, turned into the workload's by `ratio`.
function realPreset(ratio: number): Preset {
  const t = (real: number) => Math.max(8, Math.round(real / ratio));
  return {
    name: 'vllm', maxTokens: 16, tools: false, probeN: 20, rounds: 3, maxDurationS: 240,
    workload: { sessions: 8, turns: 4, groups: 2, systemTokens: [t(700), t(1000)], userTokens: [t(10), t(30)], thinkMs: [300, 800], startSpreadMs: 3000 },
  };
}

/**
 * Under pressure on a real fleet: three agents per replica, their prompts together twice one
 * replica's KV (each at most half the model's context, so a conversation still fits).
 */
function realPressure(replicas: number, capacityTokens: number | null, ratio: number, maxModelLen: number | null): Preset {
  const base = realPreset(ratio);
  const groups = Math.max(6, replicas * 3);
  const real = Math.min(maxModelLen === null ? 3000 : maxModelLen / 2, capacityTokens === null ? 1500 : (2 * capacityTokens) / groups);
  const mean = real / ratio;
  return { ...base, name: 'vllm-pressure', workload: { ...base.workload, sessions: groups * 2, groups, systemTokens: [Math.round(mean * 0.75), Math.round(mean * 1.1)] } };
}

function range(v: string | undefined, name: string): [number, number] | undefined {
  if (v === undefined) return undefined;
  const [a, b] = v.split('-').map(Number);
  const r: [number, number] = [a, b ?? a];
  if (!r.every(Number.isFinite) || r[0] > r[1] || r[0] < 0) throw new Error(`--${name} wants A-B with 0 ≤ A ≤ B, got ${v}`);
  return r;
}

function num(v: string | undefined, name: string, min = 0, max = Infinity): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isFinite(n) || n < min || n > max) throw new Error(`--${name} wants a number in [${min}, ${max}], got ${v}`);
  return n;
}

/** The served model's context length, as /v1/models lists it (vLLM's max_model_len). */
async function maxModelLen(fleet: PeerFleet): Promise<number | null> {
  try {
    const r = (await (await fetch(`${fleet.urls[0]}/v1/models`)).json()) as { data?: { id: string; max_model_len?: number }[] };
    return r.data?.find((m) => m.id === fleet.model)?.max_model_len ?? null;
  } catch {
    return null;
  }
}

function pythonVersions(): Record<string, string> {
  const py = join(PEERS_VENV, 'bin', 'python');
  if (!existsSync(py)) return {};
  const script = "import importlib.metadata as m, json; print(json.dumps({p: m.version(p) for p in ('sglang-router', 'vllm-router', 'litellm')}))";
  return JSON.parse(execFileSync(py, ['-c', script], { encoding: 'utf8' })) as Record<string, string>;
}

function versions(): Record<string, string> {
  const out: Record<string, string> = {};
  const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { version: string };
  let sha = '';
  try { sha = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim(); } catch { /* not a checkout */ }
  out.warmroute = sha ? `${pkg.version} (${sha})` : pkg.version;
  Object.assign(out, pythonVersions());
  // nginx prints its version on stderr.
  const m = /nginx\/(\S+)/.exec(spawnSync(nginxBinary(), ['-v'], { encoding: 'utf8' }).stderr ?? '');
  if (m) out.nginx = m[1];
  return out;
}

async function main(): Promise<number> {
  const s = { type: 'string' } as const;
  const { values: a } = parseArgs({
    options: {
      fleet: s, upstream: { type: 'string', multiple: true }, pressure: { type: 'boolean' }, peers: s, replicas: s, sessions: s, turns: s,
      groups: s, 'system-tokens': s, 'kv-blocks': s, seed: s, 'max-tokens': s, 'max-duration-s': s, 'request-timeout-s': s, probe: s, rounds: s,
      out: s, help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (a.help) {
    console.log(USAGE);
    return 0;
  }
  const strategies = (a.peers ?? PEER_STRATEGIES.map((x) => x.name).join(',')).split(',').map((x) => x.trim()).filter(Boolean).map(strategyNamed);
  const kind = a.upstream?.length ? 'upstream' : (a.fleet ?? 'sim');
  if (!['sim', 'vllm', 'upstream'].includes(kind)) throw new Error(`--fleet wants sim or vllm, got ${a.fleet}`);
  const replicas = num(a.replicas, 'replicas', 1, 16) ?? 4;
  const progress = createProgress();

  let preset: Preset;
  let fleet: PeerFleet;
  if (kind === 'sim') {
    preset = a.pressure ? SIM_PRESSURE : SIM;
    const kvBlocks = num(a['kv-blocks'], 'kv-blocks', 64, 1e7) ?? preset.kvBlocks;
    preset = { ...preset, kvBlocks };
    progress(`starting ${replicas} simulated vLLM replicas${kvBlocks ? ` (${kvBlocks} KV blocks each)` : ''}`);
    fleet = await simFleet(replicas, [50, 150], kvBlocks);
  } else {
    const f = kind === 'vllm' ? await vllmFleet() : await upstreamFleet(a.upstream ?? []);
    if (typeof f === 'string') {
      process.stderr.write(`bench:peers: the real fleet is not up: ${f}\n`);
      return 2;
    }
    fleet = f;
    const ratio = await fleet.tokenRatio();
    progress(`the served model makes ${ratio.toFixed(2)} tokens of each workload token (4 characters)`);
    preset = a.pressure ? realPressure(fleet.urls.length, await fleet.capacityTokens(), ratio, await maxModelLen(fleet)) : realPreset(ratio);
    preset = { ...preset, tokenRatio: ratio };
    if (kind === 'upstream') preset = { ...preset, name: preset.name.replace('vllm', 'upstream') };
  }
  const workload: Partial<WorkloadOptions> = { ...preset.workload };
  const o = {
    sessions: num(a.sessions, 'sessions', 1, 2000), turns: num(a.turns, 'turns', 1, 200), groups: num(a.groups, 'groups', 1, 1000),
    systemTokens: range(a['system-tokens'], 'system-tokens'), seed: num(a.seed, 'seed'),
  };
  for (const [k, v] of Object.entries(o)) if (v !== undefined) (workload as Record<string, unknown>)[k] = v;

  try {
    const capacityTokens = await fleet.capacityTokens();
    const opts: PeersOptions = {
      workload, strategies,
      maxDurationS: num(a['max-duration-s'], 'max-duration-s', 1, 3600) ?? preset.maxDurationS,
      requestTimeoutS: num(a['request-timeout-s'], 'request-timeout-s', 1, 600) ?? 60,
      budgetMs: 300,
      maxTokens: num(a['max-tokens'], 'max-tokens', 1, 4096) ?? preset.maxTokens,
      tools: preset.tools,
      probeN: num(a.probe, 'probe', 1, 1000) ?? preset.probeN,
      rounds: num(a.rounds, 'rounds', 1, 20) ?? preset.rounds,
      preset: preset.name,
      fleetInfo: { versions: versions(), kvBlocks: preset.kvBlocks ?? null, capacityTokens, tokenRatio: preset.tokenRatio ?? 1, replicaNice: fleet.replicaNice ?? null },
    };
    const result = await runPeers(fleet, opts, progress);
    progress.done();
    const dir = a.out ?? 'bench/out';
    mkdirSync(dir, { recursive: true });
    const stamp = result.when.replace(/[:.]/g, '-');
    const json = JSON.stringify(result);
    writeFileSync(join(dir, `peers-${preset.name}-${stamp}.json`), json);
    writeFileSync(join(dir, `peers-${preset.name}-latest.json`), json);
    const md = peersReport(result);
    writeFileSync(join(dir, `peers-${preset.name}-latest.md`), `${md}\n`);
    process.stdout.write(`${md}\n\nwrote ${join(dir, `peers-${preset.name}-latest.json`)} and .md\n`);
    const failed = result.summaries.reduce((n, x) => n + x.errors, 0);
    if (failed) process.stdout.write(`${failed} request(s) failed; the JSON has each one's error.\n`);
    return result.skipped.length || result.aborted ? 1 : 0;
  } finally {
    await fleet.stop();
  }
}

main().then(
  (code) => { process.exitCode = code; },
  (e: unknown) => {
    process.stderr.write(`\nbench:peers: ${e instanceof Error ? e.stack ?? e.message : String(e)}\n`);
    process.exitCode = 1;
  },
);
