// npx tsx bench/voice/shared-sweep.ts [--seeds 1,2,3] [--turns N] [--batch-prefill 0,1,2]
//   [--long-prefill 0,256,512,1024] [--hold on,off] [--reserved 0.25] [--async-scheduling]
//   [--max-num-batched-tokens N] [--batch-share F] [--preempt off,on] [--roofline] [--sessions N]
//   [--batch-ignore-eos] [--batch-placement least|random|stale]
// The shared-fleet frontier in virtual time (shared-des.ts): for each replica setting (the
// long-prefill threshold), the no-batch and priority-off runs once per seed, then priority on once
// per gateway setting (batch prefill bound K × hold × reserved share). Printed as one markdown
// table, each figure the mean over the seeds (p90 ratio also as min–max): voice TTFT p50/p90/p99,
// turns over budget, the voice p90 against no batch, and batch jobs/s against priority off on the
// same replicas and against priority off at vLLM's defaults (no threshold: what chunking itself costs).

import { parseArgs } from 'node:util';
import { fmt } from '../lib/percentiles.js';
import { runSharedDes, type DesSharedOptions, type GatewayKnobs } from './shared-des.js';
import { SHARED_DEFAULTS, type SharedMode, type SharedRun } from './shared.js';

const s = { type: 'string' } as const;
const { values: a } = parseArgs({
  options: {
    seeds: s, turns: s, preempt: s, 'batch-prefill': s, 'long-prefill': s, hold: s, reserved: s, 'async-scheduling': { type: 'boolean' }, roofline: { type: 'boolean' }, 'batch-ignore-eos': { type: 'boolean' }, 'batch-placement': s,
    'max-num-batched-tokens': s, 'batch-share': s, sessions: s,
  },
});
const list = (v: string | undefined, def: string) => (v ?? def).split(',');
const seeds = list(a.seeds, '1,2,3').map(Number);
const ks = list(a['batch-prefill'], '0,1,2').map(Number);
const lps = list(a['long-prefill'], '0,256,512,1024').map(Number);
const holds = list(a.hold, 'on').map((h) => h === 'on');
const reserved = list(a.reserved, '0.25').map(Number);
const preempts = list(a.preempt, 'off').map((p) => p === 'on');
const base: DesSharedOptions = {
  ...SHARED_DEFAULTS,
  turns: Number(a.turns ?? 20),
  sessions: Number(a.sessions ?? SHARED_DEFAULTS.sessions),
  batchShare: Number(a['batch-share'] ?? SHARED_DEFAULTS.batchShare),
  maxDurationS: 3600,
  batchIgnoreEos: a['batch-ignore-eos'] === true,
  batchPlacement: a['batch-placement'] === 'random' || a['batch-placement'] === 'stale' ? a['batch-placement'] : 'least',
  gateway: { batchPrefill: 1, holdForInteractive: true, reservedShare: 0.25 },
  replica: { asyncScheduling: a['async-scheduling'] === true, roofline: a.roofline === true, ...(a['max-num-batched-tokens'] ? { maxNumBatchedTokens: Number(a['max-num-batched-tokens']) } : {}) },
  gatewayMs: 1,
};

const mean = (xs: number[]) => xs.reduce((x, y) => x + y, 0) / xs.length;
const run = (mode: SharedMode, lp: number, seed: number, gateway: GatewayKnobs = base.gateway) => runSharedDes(mode, { ...base, longPrefill: lp, seed, gateway });

interface Row { label: string; k: string; hold: string; reserved: string; runs: SharedRun[]; none: SharedRun[]; off: SharedRun[]; off0: SharedRun[] }
const rows: Row[] = [];
const offAtDefaults = await Promise.all(seeds.map((seed) => run('batch, priority off', 0, seed)));
for (const lp of lps) {
  const none = await Promise.all(seeds.map((seed) => run('no batch', lp, seed)));
  const off = lp === 0 ? offAtDefaults : await Promise.all(seeds.map((seed) => run('batch, priority off', lp, seed)));
  const label = lp === 0 ? 'none' : String(lp);
  rows.push({ label, k: '—', hold: '—', reserved: '—', runs: none, none, off, off0: offAtDefaults });
  rows.push({ label, k: 'priority off', hold: '—', reserved: '—', runs: off, none, off, off0: offAtDefaults });
  for (const k of ks) for (const hold of k === 0 ? [true] : holds) for (const rs of reserved) for (const preemptBatch of preempts) {
    const runs = await Promise.all(seeds.map((seed) => run('batch, priority on', lp, seed, { batchPrefill: k, holdForInteractive: hold, reservedShare: rs, preemptBatch })));
    rows.push({ label, k: `${k === 0 ? 'off (unbounded)' : String(k)}${preemptBatch ? ', cut and resend' : ''}`, hold: k === 0 ? '—' : hold ? 'on' : 'off', reserved: String(rs), runs, none, off, off0: offAtDefaults });
  }
}

const row = (c: (string | number)[]) => `| ${c.join(' | ')} |`;
console.log(`Shared fleet in virtual time: ${base.replicas} replicas at --scheduling-policy priority${base.replica.asyncScheduling ? ' with async scheduling' : ''}${base.replica.roofline ? ', roofline step times' : ''}${base.batchIgnoreEos ? ', batch answers run to max_tokens' : ''}${base.batchPlacement !== 'least' ? `, batch placed ${base.batchPlacement === 'random' ? 'at random' : 'by a scrape a second old'}` : ''}, ${base.sessions} voice sessions × ${base.turns} turns, batch share ${base.batchShare}, seeds ${seeds.join(',')} (means; p90 ratio min–max)\n`);
console.log(row(['long-prefill threshold', 'run / batch prefill K', 'hold', 'reserved', 'voice p50 ms', 'p90', 'p99', `turns > ${base.budgetMs} ms`, 'p90 / no batch', 'batch / off (same replicas)', 'batch / off (vLLM defaults)']));
console.log(row(['---', '---', '---', '---', '---:', '---:', '---:', '---:', '---:', '---:', '---:']));
for (const r of rows) {
  const ratios = r.runs.map((x, i) => x.voice.p90 / r.none[i].voice.p90);
  const batch = r.k === '—' ? '—' : `${fmt(mean(r.runs.map((x, i) => x.batchPerS / r.off[i].batchPerS)) * 100, 0)}%`;
  const batch0 = r.k === '—' ? '—' : `${fmt(mean(r.runs.map((x, i) => x.batchPerS / r.off0[i].batchPerS)) * 100, 0)}%`;
  console.log(row([
    r.label, r.k === '—' ? 'no batch' : r.k === 'priority off' ? 'priority off' : `on, K ${r.k}`, r.hold, r.reserved,
    fmt(mean(r.runs.map((x) => x.voice.p50)), 0), fmt(mean(r.runs.map((x) => x.voice.p90)), 0), fmt(mean(r.runs.map((x) => x.voice.p99)), 0),
    `${fmt(mean(r.runs.map((x) => x.turnsOverBudget)), 1)} / ${r.runs[0].turns}`,
    `${fmt(mean(ratios))}× (${fmt(Math.min(...ratios))}–${fmt(Math.max(...ratios))})`, batch, batch0,
  ]));
}
