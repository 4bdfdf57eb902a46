// One `bench:scale` run: the plan's socket rows (one light simulated fleet per fleet size, its
// caches reset between rows), the faults, the discrete-event rows, the validation; bounded by a
// time budget, and every step past it listed as skipped instead of run.

import { cpus, loadavg } from 'node:os';
import { startSimFleet, type Fleet } from '../voice/fleet.js';
import { runDes } from './des/run.js';
import { FAULTS, faultOutcome, injectFault, type FaultOutcome } from './faults.js';
import type { DesStep, ScalePlan, SocketStep } from './plan.js';
import { compareRows, runFigures, type ScaleRow } from './rows.js';
import { runSocketRow } from './socket.js';
import { validate, type Validation } from './validate.js';
import { buildScaleWorkload, LIGHT_OUTPUT_TOKENS, SCALE_KV_BLOCKS, SCALE_WORKLOAD_DEFAULTS, type ScaleWorkloadOptions } from './workload.js';

export const PARTS = ['socket', 'faults', 'des'] as const;
export type Part = (typeof PARTS)[number];

export interface ScaleOptions {
  plan: ScalePlan;
  /** Which parts of the plan run (the others are left out, not listed as skipped). */
  parts: readonly Part[];
  maxSeconds: number;
  turns: number;
  startsPerSecond: number;
  seed: number;
  requestTimeoutS: number;
  idleS: number;
  /** DES: the gateway's own time per request, virtual ms. */
  gatewayMs: number;
  /**
   * Socket rows with KV events: blocks each simulated replica publishes after every stored one,
   * held by no pool (the sim's --kv-events-pad), so the pods' block budget fills. 0 = none.
   */
  kvPad: number;
}

export interface ScaleResult {
  kind: 'warmroute-scale-bench';
  when: string;
  machine: { cpus: number; cpu: string; node: string; loadAverage1m: number[] };
  params: Omit<ScaleOptions, 'plan'> & { plan: ScalePlan; kvBlocks: number; outputTokens: [number, number] };
  rows: ScaleRow[];
  faults: FaultOutcome[];
  validation: Validation | null;
  /** Steps the time budget left out. */
  skipped: string[];
  /** Steps that could not run, with the first line of why (a gateway that never saw its fleet up, ...). */
  failed: string[];
  wallS: number;
}

export const SCALE_DEFAULTS: Omit<ScaleOptions, 'plan'> = {
  parts: PARTS, maxSeconds: 600, turns: SCALE_WORKLOAD_DEFAULTS.turns, startsPerSecond: SCALE_WORKLOAD_DEFAULTS.startsPerSecond,
  seed: SCALE_WORKLOAD_DEFAULTS.seed, requestTimeoutS: 20, idleS: 3, gatewayMs: 1, kvPad: 0,
};

const describeSocket = (s: SocketStep) => `socket R=${s.replicas} ${s.oracle ? 'oracle' : `G=${s.pods}`} S=${s.sessions}${s.kvEvents ? '' : ' events off'}`;
const firstLine = (e: unknown) => (e instanceof Error ? e.message : String(e)).split('\n')[0].slice(0, 300);
const describeDes = (s: DesStep) => `des R=${s.replicas} ${s.strategy === 'affinity' ? `G=${s.pods}` : s.strategy} S=${s.sessions}`;

export async function runScale(o: ScaleOptions, progress: (line: string) => void): Promise<ScaleResult> {
  const t0 = performance.now();
  const load: number[] = [loadavg()[0]];
  const left = () => o.maxSeconds - (performance.now() - t0) / 1000;
  const rows: ScaleRow[] = [];
  const faults: FaultOutcome[] = [];
  const skipped: string[] = [];
  const failed: string[] = [];
  const wl = (sessions: number): ScaleWorkloadOptions => ({ sessions, turns: o.turns, startsPerSecond: o.startsPerSecond, seed: o.seed });
  // A socket row's sessions start over S / rate seconds and last a few turns after that (a turn
  // takes seconds, not the sub-second it takes on an idle machine, when the cores are shared).
  const cap = (sessions: number) => Math.max(10, Math.ceil(sessions / o.startsPerSecond + o.turns * 8));
  const socketSteps = o.parts.includes('socket') ? o.plan.socket : [];
  const faultPlan = o.parts.includes('faults') ? o.plan.faults : null;
  const sizes = [...new Set([...socketSteps.map((s) => s.replicas), ...(faultPlan ? [faultPlan.replicas] : [])])];
  for (const r of sizes) {
    const steps = socketSteps.filter((s) => s.replicas === r);
    const faulted = faultPlan?.replicas === r;
    if (left() < 20) {
      skipped.push(...steps.map(describeSocket), ...(faulted ? FAULTS.map((f) => `fault ${f}`) : []));
      continue;
    }
    progress(`starting ${r} simulated replicas in one process`);
    let fleet: Fleet | null = await startSimFleet(r, LIGHT_OUTPUT_TOKENS, SCALE_KV_BLOCKS, true, o.kvPad);
    try {
      for (const s of steps) {
        if (left() < cap(s.sessions) + 10) {
          skipped.push(describeSocket(s));
          continue;
        }
        try {
          const { row } = await runSocketRow({ fleet, strategy: s.oracle ? 'oracle' : 'affinity', pods: Math.max(1, s.pods), kvEvents: s.kvEvents, workload: wl(s.sessions), maxDurationS: cap(s.sessions), requestTimeoutS: o.requestTimeoutS, idleS: o.idleS }, progress);
          rows.push(row);
        } catch (e) {
          failed.push(`${describeSocket(s)}: ${firstLine(e)}`);
        }
        load.push(loadavg()[0]);
      }
      const f = faultPlan;
      if (faulted && f) {
        for (const kind of FAULTS) {
          if (left() < cap(f.sessions) + 10) {
            skipped.push(`fault ${kind}`);
            continue;
          }
          try {
            const res = await runSocketRow({ fleet, strategy: 'affinity', pods: f.pods, kvEvents: false, workload: wl(f.sessions), maxDurationS: cap(f.sessions), requestTimeoutS: o.requestTimeoutS, idleS: 1, fault: { at: 0.4, inject: injectFault(kind) } }, progress);
            faults.push(faultOutcome(kind, res.run.records, res.faultAtMs ?? 0, { replicas: r, pods: f.pods, sessions: f.sessions, hitRate: res.row.hitRate, ttftP90Ms: res.row.ttftP90Ms }));
          } catch (e) {
            failed.push(`fault ${kind}: ${firstLine(e)}`);
          }
        }
      }
    } finally {
      await fleet.stop();
      fleet = null;
    }
  }
  for (const s of o.parts.includes('des') ? o.plan.des : []) {
    // A DES row's wall time grows about linearly with its sessions (50–65 ms each at R ≥ 16 on two
    // cores with a load average of 20); a row that would not finish in what is left is stopped
    // there and marked truncated.
    if (left() < 10) {
      skipped.push(describeDes(s));
      continue;
    }
    progress(`[${describeDes(s)}] in virtual time`);
    const w0 = performance.now();
    const workload = buildScaleWorkload(wl(s.sessions));
    const run = runDes({ replicas: s.replicas, pods: s.pods, strategy: s.strategy, workload, kvBlocks: SCALE_KV_BLOCKS, outputTokens: LIGHT_OUTPUT_TOKENS, gatewayMs: o.gatewayMs, statsIntervalMs: 1000, maxVirtualMs: 3_600_000, maxWallMs: (left() - 5) * 1000, seed: o.seed, replay: s.strategy !== 'oracle' });
    const f = runFigures(run.records, run.sent, run);
    rows.push({
      kind: 'des', strategy: s.strategy, replicas: s.replicas, pods: s.strategy === 'oracle' ? 0 : s.pods, sessions: s.sessions, kvEvents: false,
      requests: f.requests, errors: f.errors, errorKinds: f.errorKinds, truncated: run.truncated, hitRate: f.hitRate, idealHitRate: f.idealHitRate,
      ttftP50Ms: f.ttft.p50, ttftP90Ms: f.ttft.p90, ttftP99Ms: f.ttft.p99, p90VsOnePod: null, p90VsOracle: null,
      durationS: run.virtualMs / 1000, wallS: (performance.now() - w0) / 1000,
      ...(s.strategy === 'oracle' ? {} : { routerCpuMsPerRequest: run.routerCpuMsPerRequest, ...(run.routerReplayCpuMsPerRequest === null ? {} : { routerReplayCpuMsPerRequest: run.routerReplayCpuMsPerRequest }) }),
    });
  }
  compareRows(rows);
  const v = o.plan.validate;
  const pairs = (kind: 'socket' | 'des') => rows.filter((r) => r.kind === kind && r.strategy === 'affinity' && r.pods === 1 && r.replicas === v.replicas && r.sessions === v.sessions);
  const pair = (kind: 'socket' | 'des') => pairs(kind)[0];
  // The DES models no KV events (its routers learn from cached-token feedback): a socket row without
  // them is the like-for-like one; with events the router knows residency exactly and hits more.
  const socketRow = pairs('socket').find((r) => !r.kvEvents) ?? pair('socket');
  const desRow = pair('des');
  return {
    kind: 'warmroute-scale-bench',
    when: new Date().toISOString(),
    machine: { cpus: cpus().length, cpu: cpus()[0]?.model ?? '?', node: process.version, loadAverage1m: load },
    params: { ...o, kvBlocks: SCALE_KV_BLOCKS, outputTokens: LIGHT_OUTPUT_TOKENS },
    rows, faults,
    validation: socketRow && desRow ? validate(socketRow, desRow) : null,
    skipped,
    failed,
    wallS: (performance.now() - t0) / 1000,
  };
}
