// npm run bench:calibrate -- record | replay | report
//
//   record   the workloads through warmroute's strategies on the real vLLM fleet (npm run fleet:vllm),
//            one trace per workload × strategy × round in bench/out/calibrate/traces/
//   replay   every recorded trace through the simulator, with the same capacities: each request on
//            the replica the real run chose (the replica model alone), and with the router deciding
//            (des-replay.ts, virtual time; closed-replay.ts over sockets with --sockets); per request
//            and in total against what vLLM served; the offline ideal of each trace; writes the
//            comparison (JSON and markdown)
//   versus   warmroute against a model of SGLang's cache_aware router and round-robin on the
//            calibrated simulator, over many orders of a shared-prefix workload (versus.ts)

import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { readState } from '../real/fleet-vllm.js';
import { SERVED_MODEL } from '../real/vllm-replica.js';
import { startGateway } from '../voice/fleet.js';
import { recordRun } from './record.js';
import { readTrace, writeTrace, type Trace } from './trace.js';
import { WORKLOADS } from './workloads.js';

const USAGE = `usage: npm run bench:calibrate -- <record|replay|versus> [flags]

  record: --workloads LIST (${Object.keys(WORKLOADS).join(',')})
          --strategies LIST (affinity,round-robin,session-hash)   --rounds N (1)   --duration-s N (the workload's)
  replay: [--traces DIR]  [--model vllm|naive]  [--sockets: the router deciding as a gateway process
          against a simulated fleet in real time (completions only), instead of in virtual time]
          [--no-ideal: skip the offline ideal (a few seconds a trace)]  (vllm: the replica checked against vLLM 0.32, the default; naive: the model before that check)
  versus: --workload NAME (shared-pressure; or multi-turn: inference-perf's sessions)  --seeds N (30)  --rate R (the workload's)
          --zipf S (groups drawn by a Zipf popularity of exponent S instead of cycled uniformly)  [--no-ideal]
  all:    --out DIR (bench/out/calibrate)`;

/** vLLM 0.32's defaults on a CPU for the OpenAI server: max_num_batched_tokens 2048, max_num_seqs 128. */
const CPU_BATCH = { maxNumBatchedTokens: 2048, maxNumSeqs: 128 };

async function engineOf(replica: string): Promise<Trace['engine']> {
  const t = await (await fetch(`${replica}/metrics`)).text();
  const line = t.split('\n').find((l) => l.startsWith('vllm:cache_config_info{')) ?? '';
  const label = (k: string) => Number(new RegExp(`[{,]${k}="(\\d+)"`).exec(line)?.[1]);
  const blockSize = label('block_size');
  const kvBlocks = label('num_gpu_blocks');
  if (!Number.isFinite(blockSize) || !Number.isFinite(kvBlocks)) throw new Error(`${replica}: no vllm:cache_config_info with block_size and num_gpu_blocks`);
  return { blockSize, kvBlocks, ...CPU_BATCH };
}

async function record(a: Flags, out: string): Promise<void> {
  const state = readState();
  if (!state) throw new Error('no real fleet: start one with npm run fleet:vllm');
  const urls = state.replicas.map((r) => r.url);
  const hosts = urls.map((u) => new URL(u).host);
  const engine = await engineOf(urls[0]);
  const workloads = (str(a.workloads) ?? Object.keys(WORKLOADS).join(',')).split(',');
  const strategies = (str(a.strategies) ?? 'affinity,round-robin,session-hash').split(',');
  const rounds = Number(str(a.rounds) ?? 1);
  const durationS = str(a['duration-s']) === undefined ? null : Number(a['duration-s']);
  for (let round = 0; round < rounds; round++) {
    for (const name of workloads) {
      const base = WORKLOADS[name];
      if (!base) throw new Error(`unknown workload ${name}`);
      const workload = durationS !== null && base.kind === 'shared-prefix' ? { ...base, durationS } : base;
      for (const strategy of strategies) {
        const kv = strategy === 'affinity' ? state.replicas.map((r) => r.kvEvents!) : null;
        const g = await startGateway(urls, strategy, [], kv);
        try {
          const t0 = Date.now();
          const trace = await recordRun({ url: g.url, replicas: urls, kvEvents: state.replicas.map((r) => r.kvEvents!), model: SERVED_MODEL, replicaIndex: (n) => (n === null ? -1 : hosts.indexOf(n)) }, { workloadName: name, workload, strategy, engine, run: round * 100 + Date.now() % 97 });
          const file = join(out, 'traces', `${name}.${strategy}.${trace.when.replace(/[:.]/g, '-')}.json`);
          writeTrace(file, trace);
          const q = trace.counters.reduce((s, c) => s + c.queries, 0);
          const h = trace.counters.reduce((s, c) => s + c.hits, 0);
          console.log(`${name} ${strategy}: ${trace.requests.length} requests, ${trace.requests.filter((r) => r.error).length} failed, replicas' hit rate ${(100 * h / Math.max(1, q)).toFixed(1)}% (${((Date.now() - t0) / 1000).toFixed(0)} s) → ${file}`);
        } finally {
          await g.stop();
        }
      }
    }
  }
}

type Flags = Record<string, string | boolean | undefined>;
const str = (v: string | boolean | undefined) => (typeof v === 'string' ? v : undefined);

async function replay(a: Flags, out: string): Promise<void> {
  const { compareTraces, comparisonMarkdown } = await import('./compare.js');
  const { CPU_TINY_TIMING } = await import('./engine-replay.js');
  const dir = str(a.traces) ?? join(out, 'traces');
  const files = readdirSync(dir).filter((f) => f.endsWith('.json')).sort();
  const traces = files.map((f) => readTrace(join(dir, f)));
  const model = str(a.model) ?? 'vllm';
  if (model !== 'vllm' && model !== 'naive') throw new Error('--model wants vllm or naive');
  const { bestPlacement, pooledBoundHitRate, unboundedHitRate } = await import('./ideal.js');
  const { closedReplay } = await import('./closed-replay.js');
  const { desReplay } = await import('./des-replay.js');
  const rows = compareTraces(traces, { timing: CPU_TINY_TIMING, fidelity: model });
  for (const [i, t] of traces.entries()) {
    if (!a['no-ideal']) {
      const b = bestPlacement(t, { timing: CPU_TINY_TIMING, kvModel: model });
      rows[i].ideal = { best: b.hitRate, bestShape: b.bestShape, pooled: pooledBoundHitRate(t), unbounded: unboundedHitRate(t) };
    }
    if (t.strategy === 'affinity' || t.strategy === 'round-robin' || t.strategy === 'session-hash') {
      const c = a.sockets
        ? await closedReplay(t, { strategy: t.strategy, timing: CPU_TINY_TIMING, kvModel: model, kvEvents: t.strategy === 'affinity' })
        : desReplay(t, { strategy: t.strategy, timing: CPU_TINY_TIMING, kvModel: model, kvEvents: t.strategy === 'affinity' });
      rows[i].closedHitRate = c.hitRate;
      console.log(`${t.workload} ${t.strategy}: router deciding ${(100 * c.hitRate).toFixed(1)}% (real ${(100 * rows[i].countersHitRate).toFixed(1)}%), routes ${JSON.stringify(c.routes)}`);
    }
  }
  writeFileSync(join(out, `comparison-${model}.json`), `${JSON.stringify(rows, null, 2)}\n`);
  const md = comparisonMarkdown(rows);
  writeFileSync(join(out, `comparison-${model}.md`), md);
  console.log(md);
}

async function versusCmd(a: Flags, out: string): Promise<void> {
  const { versus } = await import('./versus.js');
  const { MULTI_TURN, syntheticMultiTurnTrace, syntheticSharedTrace } = await import('./workloads.js');
  const name = str(a.workload) ?? 'shared-pressure';
  const base = name === 'multi-turn' ? MULTI_TURN : WORKLOADS[name];
  if (!base || ('kind' in base && base.kind !== 'shared-prefix')) throw new Error(`--workload wants multi-turn or a shared-prefix workload: ${Object.entries(WORKLOADS).filter(([, w]) => w.kind === 'shared-prefix').map(([n]) => n).join(', ')}`);
  const rated = str(a.rate) === undefined ? base : { ...base, ratePerS: Number(a.rate) };
  const w = str(a.zipf) === undefined ? rated : { ...rated, zipf: Number(a.zipf) };
  const n = Number(str(a.seeds) ?? 30);
  const engine = { blockSize: 128, kvBlocks: 48, ...CPU_BATCH };
  const traceOf = (seed: number) => ('kind' in w ? syntheticSharedTrace(w, seed, engine) : syntheticMultiTurnTrace(w, seed, engine));
  const v = versus(traceOf, Array.from({ length: n }, (_, i) => i + 1), { ideal: !a['no-ideal'] });
  const pc = (x: number | null) => (x === null ? '—' : `${(100 * x).toFixed(1)}%`);
  const md = [
    `${name} (${w.groups} prompts × ${w.usersPerGroup} users${'zipf' in w && w.zipf !== undefined ? `, Zipf ${w.zipf} popularity` : ''}, ${w.ratePerS}/s for ${w.durationS} s), ${n} orders on 2 replicas of ${engine.kvBlocks} × ${engine.blockSize}-token blocks:`, '',
    '| | warmroute | SGLang `cache_aware` (model) | round-robin | best shape, median | best in hindsight |', '|---|---:|---:|---:|---:|---:|',
    `| mean hit rate | ${pc(v.mean.warmroute)} | ${pc(v.mean.sglang)} | ${pc(v.mean.roundRobin)} | ${pc(v.mean.bestShapeMedian)} | ${pc(v.mean.best)} |`,
    '| hits by popularity: busiest ¼ of prompts / next ¼ / quieter ½ | ' + [v.byPopularity.warmroute, v.byPopularity.sglang].map((x) => (x === null ? '—' : x.map((y) => pc(y)).join(' / '))).join(' | ') + ' | — | — | ' + (v.byPopularity.best === null ? '—' : v.byPopularity.best.map((y) => pc(y)).join(' / ')) + ' |', '',
    `warmroute − SGLang per order: ${v.diffMean.toFixed(1)} ± ${v.diffSd.toFixed(1)} points (mean ± sd); warmroute ahead or equal on ${v.aheadOrEqual} of ${n} orders, so ahead in three independent runs with probability ≈ ${((v.aheadOrEqual / n) ** 3).toFixed(2)}.`,
  ].join('\n');
  writeFileSync(join(out, `versus-${name}.json`), `${JSON.stringify({ workload: name, ...w, engine, ...v }, null, 2)}\n`);
  writeFileSync(join(out, `versus-${name}.md`), `${md}\n`);
  console.log(md);
}

async function main(): Promise<void> {
  const s = { type: 'string' } as const;
  const { values: a, positionals } = parseArgs({ options: { workloads: s, strategies: s, rounds: s, 'duration-s': s, traces: s, model: s, workload: s, seeds: s, rate: s, zipf: s, sockets: { type: 'boolean' }, 'no-ideal': { type: 'boolean' }, out: s, help: { type: 'boolean', short: 'h' } }, allowPositionals: true });
  const cmd = positionals[0];
  if (a.help || !cmd) {
    console.log(USAGE);
    return;
  }
  const out = a.out ?? 'bench/out/calibrate';
  mkdirSync(join(out, 'traces'), { recursive: true });
  if (cmd === 'record') await record(a, out);
  else if (cmd === 'replay') await replay(a, out);
  else if (cmd === 'versus') await versusCmd(a, out);
  else throw new Error(USAGE);
}

main().catch((e) => {
  console.error(e instanceof Error ? e.stack : e);
  process.exit(1);
});
