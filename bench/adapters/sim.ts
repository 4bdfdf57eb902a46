// npm run bench:adapters -- [--replicas 8] [--adapters 32] [--max-loras 4] [--max-cpu-loras 8]
//   [--sessions 192] [--turns 6] [--zipf 1] [--seeds 1,2]
//   [--strategies affinity,round-robin,session-hash,oracle] (also: popularity-oracle)
//   [--lora-load-ms 50] [--start-spread-ms 2000] [--pods 1] [--stats-ms 1000]
// With --fleet sim|vllm (or --real, the same as --fleet vllm): the fleet benchmark over HTTP
// instead (bench/adapters/fleet.ts: two replicas, --max-loras 2, against the same sessions sent
// as one adapter; then on-demand loading).
// A fleet of LoRA adapters in the simulator, in virtual time (sim-run.ts): voice sessions, each of
// one adapter, adapters of Zipf popularity, against warmroute, round-robin, session hash and an
// adapter-grouping oracle that knows every adapter's traffic in advance (each adapter on as few
// replicas as its load needs, at most max-loras adapters a replica, the busiest spread first); on
// request, the same plan made from the adapters' popularity instead of this run's counts. Per
// strategy: TTFT p50/p90 (virtual ms) and the p90's ratio to the oracle's, the prefix hit rate
// against the ideal (bench/voice/ideal.ts), the busiest replica's requests against the mean, and
// how many adapters each replica served. Writes bench/out/adapters-sim.json.

import { mkdirSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { ADAPTER_SIM_DEFAULTS, ADAPTER_SIM_STRATEGIES, runAdapterSim, type AdapterSimOptions, type AdapterSimStrategy } from './sim-run.js';

if (process.argv.some((x) => x === '--real' || x === '--fleet' || x.startsWith('--fleet='))) {
  const { main } = await import('./fleet.js');
  await main(process.argv.slice(2));
  process.exit(0);
}

const s = { type: 'string' } as const;
const { values: a } = parseArgs({ options: { replicas: s, adapters: s, 'max-loras': s, 'max-cpu-loras': s, sessions: s, turns: s, zipf: s, seeds: s, strategies: s, 'lora-load-ms': s, 'start-spread-ms': s, pods: s, 'stats-ms': s } });
const num = (v: string | undefined, def: number) => (v === undefined ? def : Number(v));
const d = ADAPTER_SIM_DEFAULTS;
const o: AdapterSimOptions = {
  replicas: num(a.replicas, d.replicas), adapters: num(a.adapters, d.adapters), maxLoras: num(a['max-loras'], d.maxLoras), maxCpuLoras: num(a['max-cpu-loras'], d.maxCpuLoras),
  sessions: num(a.sessions, d.sessions), turns: num(a.turns, d.turns), zipf: num(a.zipf, d.zipf), loadMs: num(a['lora-load-ms'], d.loadMs), startSpreadMs: num(a['start-spread-ms'], d.startSpreadMs),
  pods: num(a.pods, d.pods), statsMs: num(a['stats-ms'], d.statsMs),
};
const strategies = (a.strategies ?? 'affinity,round-robin,session-hash,oracle').split(',') as AdapterSimStrategy[];
const unknown = strategies.filter((x) => !(ADAPTER_SIM_STRATEGIES as readonly string[]).includes(x));
if (unknown.length > 0) {
  console.error(`unknown strategy ${unknown.join(', ')}: one of ${ADAPTER_SIM_STRATEGIES.join(', ')}`);
  process.exit(2);
}

const out: Record<string, unknown>[] = [];
console.log(`${o.replicas} replicas × ${o.adapters} adapters (Zipf s=${o.zipf}), --max-loras ${o.maxLoras}, --max-cpu-loras ${o.maxCpuLoras}; ${o.sessions} sessions × ${o.turns} turns, starting within ${o.startSpreadMs / 1000} s; ${o.pods} gateway pod(s) sharing one store, each scraping every ${o.statsMs} ms`);
for (const seed of (a.seeds ?? '1,2').split(',').map(Number)) {
  const rows = runAdapterSim(o, seed, strategies);
  const oracle = rows.find((r) => r.strategy === 'oracle');
  console.log(`\nseed ${seed}\n| strategy | TTFT p50 | TTFT p90 | p90 / oracle | hit rate | of ideal | busiest replica / mean | errors | adapters served per replica |\n|---|---:|---:|---:|---:|---:|---:|---:|---|`);
  for (const r of rows) {
    const name = r.strategy === 'affinity' ? 'warmroute' : r.strategy === 'oracle' ? 'adapter-grouping oracle' : r.strategy === 'popularity-oracle' ? 'the oracle’s plan from popularity' : r.strategy;
    console.log(`| ${name} | ${r.p50.toFixed(0)} ms | ${r.p90.toFixed(0)} ms | ${oracle ? (r.p90 / oracle.p90).toFixed(2) : '—'}× | ${(r.hit * 100).toFixed(1)}% | ${((r.hit / r.ideal) * 100).toFixed(1)}% | ${r.maxOverMean.toFixed(2)} | ${r.errors} | ${r.adaptersPerReplica.join(' ')} |`);
    out.push({ ...r, p90OverOracle: oracle ? r.p90 / oracle.p90 : null });
  }
}
mkdirSync('bench/out', { recursive: true });
writeFileSync('bench/out/adapters-sim.json', JSON.stringify({ ...o, at: new Date().toISOString(), rows: out }, null, 2));
