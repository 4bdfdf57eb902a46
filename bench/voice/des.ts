// npx tsx bench/voice/des.ts --preset NAME [--seeds 1,2,3] [--strategies affinity,affinity@4,oracle]
//   [--groups N] [--sessions N] [--turns N] [--kv-blocks N] (override the preset's)
// A bench:voice preset through the discrete-event run of bench:scale (the router's own code, the
// simulator's engine and block pool, virtual time, no sockets): seconds instead of minutes, so a
// placement rule can be compared on several seeds before the socket run. Per strategy and seed:
// the replicas' hit rate against the ideal (bench/voice/ideal.ts), the TTFT p90 in virtual ms,
// each replica's first placements (sessions : agents) and the route reasons. No warmup, no
// gateway process: figures to compare rules by, not the socket run's.

import { parseArgs } from 'node:util';
import { runDes, type DesStrategy } from '../scale/des/run.js';
import { idealHits } from './ideal.js';
import { presetFlags } from './presets.js';
import { buildWorkload, WORKLOAD_DEFAULTS } from './workload.js';

const s = { type: 'string' } as const;
const { values: a } = parseArgs({ options: { preset: s, seeds: s, strategies: s, groups: s, sessions: s, turns: s, 'kv-blocks': s } });
const f: Record<string, string | boolean> = { ...presetFlags(a.preset) };
for (const k of ['groups', 'sessions', 'turns', 'kv-blocks'] as const) {
  const v = a[k];
  if (v !== undefined) f[k] = v;
}
const num = (k: string, def: number) => (f[k] === undefined ? def : Number(f[k]));
const range = (k: string, def: readonly [number, number]): [number, number] => {
  const v = f[k];
  if (typeof v !== 'string') return [def[0], def[1]];
  const [lo, hi] = v.split('-').map(Number);
  return [lo, hi ?? lo];
};
const W = WORKLOAD_DEFAULTS;
const replicas = num('replicas', 4);
const kvBlocks = num('kv-blocks', 24_576);
const strategies = (a.strategies ?? 'affinity,affinity@4,oracle').split(',');

for (const seed of (a.seeds ?? '1,2,3').split(',').map(Number)) {
  const workload = buildWorkload({
    ...W,
    sessions: num('sessions', W.sessions), turns: num('turns', W.turns), groups: num('groups', W.groups),
    systemTokens: range('system-tokens', W.systemTokens), toolTurnShare: num('tool-turns', W.toolTurnShare),
    startSpreadMs: num('start-spread-ms', W.startSpreadMs), startRamp: f['start-ramp'] === true, seed,
  });
  for (const strategy of strategies) {
    const [name, pods] = strategy.split('@');
    const run = runDes({ replicas, pods: Number(pods ?? 1), strategy: name as DesStrategy, workload, kvBlocks, outputTokens: range('output-tokens', [50, 150]), gatewayMs: 1, statsIntervalMs: 1_000, maxVirtualMs: 3_600_000, seed });
    const hit = run.hits / Math.max(1, run.queries);
    const ideal = idealHits(run.sent).hitRate;
    const ttft = run.records.map((r) => r.ttftMs ?? Infinity).sort((x, y) => x - y);
    const first = new Map<string, number[]>();
    const reasons: Record<string, number> = {};
    for (const r of run.records) {
      if (r.route !== null) reasons[r.route] = (reasons[r.route] ?? 0) + 1;
      if (r.turn === 0 && r.step === 0) first.set(r.replica, [...(first.get(r.replica) ?? []), workload.sessions[r.session].group]);
    }
    const placed = [...first.keys()].sort().map((k) => `${first.get(k)!.length}:${new Set(first.get(k)).size}`).join(' ');
    console.log(`seed ${seed} ${strategy.padEnd(12)} hit ${(hit * 100).toFixed(1)}% of ideal ${(ideal * 100).toFixed(1)}% = ${((hit / ideal) * 100).toFixed(1)}%  p90 ${ttft[Math.floor(ttft.length * 0.9)].toFixed(0)} ms  first placements (sessions:agents) ${placed}  ${JSON.stringify(reasons)}`);
  }
}
