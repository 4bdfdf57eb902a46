// `bench:voice --batch-share F` / `--preset shared`: the shared-fleet runs (shared.ts), printed as a
// table with the goal's verdict and written to <out>/voice-shared-latest.{json,md}.

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runShared, SHARED_DEFAULTS, sharedTable, sharedVerdict, type SharedOptions } from './shared.js';

type Flags = Record<string, string | boolean | undefined>;

function range(v: string | boolean | undefined, def: [number, number], name: string): [number, number] {
  if (typeof v !== 'string') return def;
  const [a, b] = v.split('-').map(Number);
  const r: [number, number] = [a, b ?? a];
  if (!r.every(Number.isFinite) || r[0] > r[1] || r[0] < 0) throw new Error(`--${name} wants A-B with 0 ≤ A ≤ B, got ${v}`);
  return r;
}

function num(v: string | boolean | undefined, def: number, name: string, min: number, max: number): number {
  if (typeof v !== 'string') return def;
  const n = Number(v);
  if (!Number.isFinite(n) || n < min || n > max) throw new Error(`--${name} wants a number in [${min}, ${max}], got ${v}`);
  return n;
}

export const SHARED_USAGE = `  --batch-share F          shared fleet: batch workers are this share of the clients (0 < F ≤ 0.9); runs no batch,
                           batch with priority off and batch with priority on (x-priority: batch), then the verdict
  --batch-prompt-tokens A-B  batch job prompt tokens (${SHARED_DEFAULTS.batchPromptTokens.join('-')})
  --batch-output-tokens A-B  batch job max_tokens (${SHARED_DEFAULTS.batchOutputTokens.join('-')})
  --batch-ignore-eos       batch jobs sent with ignore_eos: each answer runs to its max_tokens (without it the
                           simulator ends them at its natural length, the voice --output-tokens range)
  --slots-per-replica N    shared fleet: the gateway's limits.maxInflightPerReplica (${SHARED_DEFAULTS.slotsPerReplica}; a quarter reserved for voice)
  --batch-prefill K[,K...] shared fleet: limits.batchPrefillPerReplica with priority on, one run each, 0 unbounded (${SHARED_DEFAULTS.batchPrefill.join(',')});
                           the first is the verdict's
  --fleet vllm             shared fleet: real vLLM (CPU) replicas of the tiny model, started for the run at
                           --scheduling-policy priority and stopped after (refused while npm run fleet:vllm runs)
  --long-prefill N         shared fleet: the replicas' --long-prefill-token-threshold (${SHARED_DEFAULTS.longPrefill}: vLLM's default, none)
  (shared fleet: --groups is the voice agents, one system prompt each (${SHARED_DEFAULTS.agents}), warmed on every replica
   before each run unless --no-warmup)`;

function fail(message: string): never {
  throw new Error(message);
}

export async function sharedMain(a: Flags): Promise<number> {
  const d = SHARED_DEFAULTS;
  const o: SharedOptions = {
    ...d,
    replicas: num(a.replicas, d.replicas, 'replicas', 1, 16),
    sessions: num(a.sessions, d.sessions, 'sessions', 1, 500),
    turns: num(a.turns, d.turns, 'turns', 1, 100),
    batchShare: num(a['batch-share'], d.batchShare, 'batch-share', 0.01, 0.9),
    batchPromptTokens: range(a['batch-prompt-tokens'], d.batchPromptTokens, 'batch-prompt-tokens'),
    batchOutputTokens: range(a['batch-output-tokens'], d.batchOutputTokens, 'batch-output-tokens'),
    batchIgnoreEos: a['batch-ignore-eos'] === true,
    systemTokens: range(a['system-tokens'], d.systemTokens, 'system-tokens'),
    userTokens: range(a['user-tokens'], d.userTokens, 'user-tokens'),
    outputTokens: range(a['output-tokens'], d.outputTokens, 'output-tokens'),
    thinkMs: range(a['think-ms'], d.thinkMs, 'think-ms'),
    budgetMs: num(a['budget-ms'], d.budgetMs, 'budget-ms', 1, 60_000),
    slotsPerReplica: num(a['slots-per-replica'], d.slotsPerReplica, 'slots-per-replica', 1, 1024),
    batchPrefill: typeof a['batch-prefill'] === 'string' ? a['batch-prefill'].split(',').map((v) => num(v, 0, 'batch-prefill', 0, 1024)) : d.batchPrefill,
    longPrefill: num(a['long-prefill'], d.longPrefill, 'long-prefill', 0, 1_000_000),
    fleet: a.fleet === undefined ? d.fleet : a.fleet === 'vllm' || a.fleet === 'sim' ? a.fleet : fail(`--fleet is sim or vllm, got ${String(a.fleet)}`),
    agents: num(a.groups, d.agents, 'groups', 1, 100),
    warmup: !a['no-warmup'],
    maxDurationS: num(a['max-duration-s'], d.maxDurationS, 'max-duration-s', 1, 3600),
    seed: num(a.seed, d.seed, 'seed', 0, 2 ** 31),
  };
  const runs = await runShared(o, (l) => process.stderr.write(`${l}\n`));
  const table = sharedTable(runs, o);
  const out = typeof a.out === 'string' ? a.out : 'bench/out';
  mkdirSync(out, { recursive: true });
  const stamp = new Date().toISOString();
  writeFileSync(join(out, 'voice-shared-latest.json'), JSON.stringify({ at: stamp, options: o, runs, verdict: sharedVerdict(runs) }, null, 2));
  writeFileSync(join(out, 'voice-shared-latest.md'), `${table}\n`);
  process.stdout.write(`\nShared fleet (${o.replicas} ${o.fleet === 'vllm' ? 'vLLM (CPU)' : 'simulated'} replicas at --scheduling-policy priority${o.longPrefill > 0 ? ` and --long-prefill-token-threshold ${o.longPrefill}` : ''}, ${o.sessions} voice sessions × ${o.turns} turns, batch share ${o.batchShare}):\n\n${table}\n\nwrote ${join(out, 'voice-shared-latest.json')}, ${join(out, 'voice-shared-latest.md')}\n`);
  return 0;
}
