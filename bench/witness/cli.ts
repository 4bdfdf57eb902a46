// npm run bench:witness — inference-perf, the peers' own benchmark tool, as an outside witness on
// the real vLLM fleet (npm run fleet:vllm): its workloads through warmroute and the routers users
// would pick instead, one router at a time, each round in a rotated order. Within a round every
// router gets the same prompts in the same order (one seed) from emptied caches (vLLM's
// /reset_prefix_cache, which the benchmark fleet serves): the routers differ, nothing else does.
// Hits are read from the replicas' own counters around each run, TTFT and failures from
// inference-perf's own summary.
// Writes bench/out/witness/witness-<time>.json and -latest.md; prints the table.

import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { call } from '../lib/http.js';
import { sumSamples } from '../lib/prom.js';
import { roundOrder } from '../peers/bench.js';
import { startSglang, startVllmRouter, type Router } from '../peers/routers.js';
import { readState } from '../real/fleet-vllm.js';
import { MODEL_DIR, SERVED_MODEL } from '../real/vllm-replica.js';
import { startGateway } from '../voice/fleet.js';
import { readWitnessSummary, witnessConfig, WITNESS_WORKLOADS, type WitnessSummary } from './config.js';

const VENV = process.env.WARMROUTE_WITNESS_VENV ?? join(homedir(), '.cache/warmroute/venv-iperf');

interface Started { url: string; stop(): Promise<void> }

/** The routers compared: warmroute reads the replicas' KV events, as its docs tell operators to set it up. */
const ROUTERS: Record<string, (urls: string[], kv: { endpoint: string; replayEndpoint: string }[]) => Promise<Started>> = {
  warmroute: async (urls, kv) => startGateway(urls, 'affinity', [], kv),
  'sglang-cache-aware': async (urls) => peer(await startSglang(urls, 'cache_aware')),
  'vllm-router-cache-aware': async (urls) => peer(await startVllmRouter(urls, 'cache_aware')),
  'round-robin': async (urls) => startGateway(urls, 'round-robin'),
};

const peer = (r: Router): Started => ({ url: r.url, stop: r.stop });

const USAGE = `usage: npm run bench:witness -- [--workloads ${Object.keys(WITNESS_WORKLOADS).join(',')}]
       [--routers ${Object.keys(ROUTERS).join(',')}] [--rounds N (3)] [--duration-s N (60)] [--out DIR (bench/out/witness)]`;

/**
 * Empties every replica's prefix cache, so that a run starts as cold as the one before it. False
 * when a replica does not serve the route (a fleet started without VLLM_SERVER_DEV_MODE).
 */
async function resetCaches(urls: readonly string[]): Promise<boolean> {
  const done = await Promise.all(urls.map(async (u) => {
    try {
      const r = await fetch(`${u}/reset_prefix_cache`, { method: 'POST', signal: AbortSignal.timeout(10_000) });
      await r.arrayBuffer();
      return r.ok;
    } catch {
      return false;
    }
  }));
  return done.every(Boolean);
}

async function counters(urls: readonly string[]): Promise<{ queries: number; hits: number }> {
  const texts = await Promise.all(urls.map(async (u) => (await call(`${u}/metrics`)).text()));
  return { queries: sumSamples(texts, 'vllm:prefix_cache_queries_total'), hits: sumSamples(texts, 'vllm:prefix_cache_hits_total') };
}

function runInferencePerf(configFile: string, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(join(VENV, 'bin', 'inference-perf'), ['--config_file', configFile], { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let tail = '';
    const keep = (d: Buffer) => { tail = (tail + d.toString()).slice(-3000); };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    const timer = setTimeout(() => { try { process.kill(-child.pid!, 'SIGKILL'); } catch { /* gone */ } }, timeoutMs);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve();
      else reject(new Error(`inference-perf exited (code ${code}, signal ${signal}); its last output:\n${tail}`));
    });
  });
}

export interface WitnessRow extends WitnessSummary {
  workload: string;
  router: string;
  round: number;
  /** Every router of the round got the same prompts from emptied caches. */
  paired: boolean;
  hitRate: number;
  queries: number;
}

async function main(): Promise<void> {
  const s = { type: 'string' } as const;
  const { values: a } = parseArgs({ options: { workloads: s, routers: s, rounds: s, 'duration-s': s, out: s, help: { type: 'boolean', short: 'h' } } });
  if (a.help) {
    console.log(USAGE);
    return;
  }
  if (!existsSync(join(VENV, 'bin', 'inference-perf'))) throw new Error(`no inference-perf in ${VENV}: bash bench/witness/install.sh`);
  const state = readState();
  if (!state) throw new Error('no real fleet: start one with npm run fleet:vllm');
  const urls = state.replicas.map((r) => r.url);
  const kv = state.replicas.map((r) => ({ endpoint: r.kvEvents!.endpoint, replayEndpoint: r.kvEvents!.replayEndpoint }));
  const workloads = (a.workloads ?? 'shared-pressure,shared,multi-turn').split(',');
  const routers = (a.routers ?? Object.keys(ROUTERS).join(',')).split(',');
  for (const w of workloads) if (!WITNESS_WORKLOADS[w]) throw new Error(`unknown workload ${w}\n${USAGE}`);
  for (const r of routers) if (!ROUTERS[r]) throw new Error(`unknown router ${r}\n${USAGE}`);
  const rounds = Number(a.rounds ?? 3);
  const out = a.out ?? 'bench/out/witness';
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  mkdirSync(out, { recursive: true });
  const rows: WitnessRow[] = [];
  let seed = Date.now() % 100_000;
  const paired = await resetCaches(urls);
  if (!paired) console.warn('warning: the fleet does not serve POST /reset_prefix_cache (restart it with npm run fleet:vllm): each run gets prompts of its own instead, so that none starts warm from another\'s, and the rounds compare different orders');
  for (let round = 0; round < rounds; round++) {
    for (const name of workloads) {
      const w = { ...WITNESS_WORKLOADS[name], ...(a['duration-s'] ? { durationS: Number(a['duration-s']) } : {}) };
      const roundSeed = seed++;
      for (const router of roundOrder(routers, round)) {
        const dir = join(out, `${stamp}-${name}-${router}-${round}`);
        mkdirSync(dir, { recursive: true });
        const cfg = join(dir, 'config.yaml');
        if (paired && !(await resetCaches(urls))) throw new Error('a replica stopped serving POST /reset_prefix_cache');
        const r = await ROUTERS[router](urls, kv);
        try {
          writeFileSync(cfg, witnessConfig(w, { baseUrl: r.url, model: SERVED_MODEL, tokenizerDir: MODEL_DIR, outDir: dir, seed: paired ? roundSeed : seed++ }));
          const before = await counters(urls);
          await runInferencePerf(cfg, (w.durationS + 180) * 1000);
          const after = await counters(urls);
          const summary = readWitnessSummary(readFileSync(join(dir, 'summary_lifecycle_metrics.json'), 'utf8'));
          const queries = after.queries - before.queries;
          const row: WitnessRow = { workload: name, router, round, paired, hitRate: queries > 0 ? (after.hits - before.hits) / queries : 0, queries, ...summary };
          rows.push(row);
          console.log(`round ${round + 1} ${name} ${router}: hits ${(100 * row.hitRate).toFixed(1)}%, TTFT p50 ${row.ttftP50Ms?.toFixed(0)} p90 ${row.ttftP90Ms?.toFixed(0)} ms, ${row.successes} ok, ${row.failures} failed`);
        } finally {
          await r.stop();
        }
      }
    }
  }
  writeFileSync(join(out, `witness-${stamp}.json`), `${JSON.stringify({ kind: 'warmroute-witness', when: stamp, fleet: urls, workloads: Object.fromEntries(workloads.map((w) => [w, WITNESS_WORKLOADS[w]])), rows }, null, 2)}\n`);
  const md = witnessMarkdown(rows, workloads, routers);
  writeFileSync(join(out, 'witness-latest.md'), md);
  console.log(md);
}

const f = (x: number | null) => (x === null ? '—' : x.toFixed(0));

/** Per workload and router: each round's hits, TTFT p50 and p90, and failures, as the goals read them. */
export function witnessMarkdown(rows: readonly WitnessRow[], workloads: readonly string[], routers: readonly string[]): string {
  const lines: string[] = [];
  for (const w of workloads) {
    lines.push(`\n**${w}**\n`, '| router | hits (each round) | TTFT p50 ms (each round) | TTFT p90 ms (each round) | failed |', '|---|---|---|---|---:|');
    for (const r of routers) {
      const mine = rows.filter((x) => x.workload === w && x.router === r).sort((x, y) => x.round - y.round);
      if (mine.length === 0) continue;
      lines.push(`| ${r} | ${mine.map((x) => `${(100 * x.hitRate).toFixed(1)}%`).join(' / ')} | ${mine.map((x) => f(x.ttftP50Ms)).join(' / ')} | ${mine.map((x) => f(x.ttftP90Ms)).join(' / ')} | ${mine.reduce((n, x) => n + x.failures, 0)} |`);
    }
  }
  return `${lines.join('\n')}\n`;
}

main().catch((e) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(1);
});
