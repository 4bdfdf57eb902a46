// One bench:peers run: one fleet, then for each router in turn: its caches emptied (or, on a fleet
// that cannot be reset, prompts of its own), the router started, the deploy warmup straight to the
// replicas, the added-latency probe, the same voice workload through it, the replicas' counters
// read around it, the router stopped. One router at a time, so none competes with another for CPU.

import { cpus } from 'node:os';
import type { DialogueRequest } from '../voice/dialogue.js';
import { plannedRequests, runStrategy, type TurnRecord } from '../voice/run.js';
import { summarize, type StrategySummary } from '../voice/summary.js';
import { warmReplicas } from '../voice/warmup.js';
import { buildWorkload, type SessionPlan, type Workload, type WorkloadOptions } from '../voice/workload.js';
import type { GatewayMetrics, GatewayTimes } from '../voice/fleet.js';
import { groupCpuSeconds } from '../lib/procs.js';
import type { EngineTimes, PeerFleet, PhaseTotal } from './fleet.js';
import { addedFrom, probeAddedLatency, type AddedLatency } from './probe.js';
import type { PeerStrategy, RunningRouter } from './strategies.js';

export interface PeersOptions {
  workload: Partial<WorkloadOptions>;
  strategies: readonly PeerStrategy[];
  maxDurationS: number;
  requestTimeoutS: number;
  budgetMs: number;
  /** Caps every answer (a CPU fleet: short generations); null keeps the workload's. */
  maxTokens: number | null;
  /** Sends the agents' tools (off for a fleet served without tool calling). */
  tools: boolean;
  probeN: number;
  /**
   * Every router runs this many times, each round in a rotated order, figures pooled: on a machine
   * shared with other work, one router's run can land in a busy minute; rounds spread that over all.
   */
  rounds: number;
  /** What the run is called in the outputs: sim, sim-pressure, vllm, ... */
  preset: string;
  /** Facts about the fleet for the record: versions, KV capacity, flags. */
  fleetInfo: Record<string, unknown>;
}

export interface PeerSummary extends StrategySummary {
  label: string;
  added: AddedLatency;
  /** Prompts salted for this strategy because the fleet could not be reset. */
  salted: boolean;
  /** Each replica's share of the prompt tokens sent during the run (its own counter), fleet order. */
  replicaShare: number[];
  /** Means of what the replicas measured of the same requests (ms); null for a phase not exported. */
  engine: { ttftMs: number | null; queueMs: number | null; prefillMs: number | null };
  /** The router's CPU time (its process group) per request during the runs; null where not measurable. */
  routerCpuMsPerRequest: number | null;
  /**
   * warmroute's own clock over the runs (means, ms): its TTFT (request in → first token bytes
   * written to the client) and each hop; null for a peer. Set against the client's TTFT and the
   * replica's, they place the time outside the engine on one side of the gateway or the other.
   */
  gatewayMeansMs: { ttft: number | null; hops: Record<string, number> } | null;
}

export type PeerRecord = TurnRecord & { round?: number };

export interface PeersResult {
  kind: 'warmroute-peers-bench';
  when: string;
  machine: { cpus: number; cpu: string; node: string };
  fleet: { kind: string; replicas: string[]; model: string } & Record<string, unknown>;
  params: Omit<PeersOptions, 'strategies' | 'workload'> & { workload: WorkloadOptions; strategies: string[]; plannedRequests: number };
  summaries: PeerSummary[];
  /** Routers that could not be started or failed, and why: the run goes on without them. */
  skipped: { name: string; label: string; reason: string }[];
  /** Why the run ended early (the fleet went down), with the figures of what was complete. */
  aborted: string | null;
  records: PeerRecord[];
  wallMs: number;
}

/**
 * The workload one strategy sends: with no key at all for a keyless run; without tools for a fleet
 * that serves none; with every system prompt salted when the fleet's caches could not be emptied,
 * so that no router starts from what the previous one left (the deploy warmup then warms the salted
 * prompts for each alike).
 */
function workloadFor(base: Workload, s: PeerStrategy, salt: string | null, tools: boolean): Workload {
  const groups = base.groups.map((g) => ({ ...g, system: salt === null ? g.system : `[${salt}] ${g.system}`, tools: tools ? g.tools : [] }));
  const sessions = base.sessions.map((x): SessionPlan => (s.keyless ? { ...x, keyMode: 'none' } : x));
  const options = tools ? base.options : { ...base.options, toolTurnShare: 0 };
  return { options, groups, sessions: tools ? sessions : sessions.map((x) => ({ ...x, turns: x.turns.map((t) => ({ ...t, tool: null, user: t.tool ? t.user.replace(/^please call \S+ /, '') : t.user })) })) };
}

function adjuster(s: PeerStrategy, router: RunningRouter, model: string, o: PeersOptions) {
  return (session: SessionPlan, req: Pick<DialogueRequest, 'headers' | 'body'>) => {
    Object.assign(req.headers, router.headers);
    if (s.sessionHeader && session.keyMode !== 'none') req.headers[s.sessionHeader] = session.id;
    req.body.model = model;
    if (o.maxTokens !== null) req.body.max_tokens = o.maxTokens;
    if (!o.tools) delete req.body.tools;
  };
}

/** The fleet changed under a run (a replica restarted): the step's figures are not kept. */
class FleetChanged extends Error {}

async function waitFor(f: () => Promise<boolean>, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await f()) return true;
    await new Promise((r) => setTimeout(r, 2000));
  }
  return false;
}

/** What one router's runs add up to over the rounds. */
interface Tally {
  records: TurnRecord[];
  queries: number;
  hits: number;
  durationMs: number;
  truncated: boolean;
  direct: number[];
  via: number[];
  probeFailed: number;
  gateway: GatewayMetrics | null;
  salted: boolean;
  perReplica: number[];
  engine: EngineTimes;
  /** Router CPU seconds over the runs; null once any run could not measure it. */
  cpuS: number | null;
  gatewayTimes: GatewayTimes | null;
}

/** Round r visits the routers starting at the r-th: none always runs first, or last, on a busy machine. */
export function roundOrder<T>(items: readonly T[], round: number): T[] {
  const k = round % Math.max(1, items.length);
  return [...items.slice(k), ...items.slice(0, k)];
}

export async function runPeers(fleet: PeerFleet, o: PeersOptions, progress: (line: string) => void): Promise<PeersResult> {
  const t0 = performance.now();
  const base = buildWorkload(o.workload);
  const tallies = new Map<string, Tally>();
  const skipped: PeersResult['skipped'] = [];
  const timeoutMs = o.requestTimeoutS * 1000;
  const total = o.rounds * o.strategies.length;
  let step = 0;
  let aborted: string | null = null;
  rounds: for (let round = 0; round < o.rounds; round++) {
    for (const s of roundOrder(o.strategies, round)) {
      step++;
      if (skipped.some((x) => x.name === s.name)) continue;
      const tag = `[${step}/${total} ${s.name}${o.rounds > 1 ? `, round ${round + 1}` : ''}]`;
      // A fleet that is not ours may restart a replica under us: wait for it, and run the step again
      // once; if it stays down, end the run with what is complete. A router that fails is skipped.
      for (let attempt = 0; ; attempt++) {
        try {
          await runStep(s, tag, round, step);
          break;
        } catch (e) {
          const reason = (e as Error).message;
          if (!(e instanceof FleetChanged) && (await fleet.healthy())) {
            progress(`${tag} failed, skipped from now on: ${reason.split('\n')[0]}`);
            skipped.push({ name: s.name, label: s.label, reason });
            break;
          }
          progress(`${tag} the fleet is down (${reason.split('\n')[0]}); waiting up to 120 s for it`);
          if (attempt === 0 && (await waitFor(() => fleet.healthy(), 120_000))) continue;
          aborted = `the fleet went down during ${s.name}, round ${round + 1}: ${reason.split('\n')[0]}`;
          break rounds;
        }
      }
    }
  }

  async function runStep(s: PeerStrategy, tag: string, round: number, step: number): Promise<void> {
    const emptied = await fleet.reset();
    const w = workloadFor(base, s, emptied ? null : `run ${step} of ${total}`, o.tools);
    progress(`${tag} starting ${s.label}`);
    let router: RunningRouter;
    try {
      router = await s.start(fleet.urls, fleet.model);
    } catch (e) {
      const reason = (e as Error).message;
      progress(`${tag} could not be started, skipped: ${reason.split('\n')[0]}`);
      skipped.push({ name: s.name, label: s.label, reason });
      return;
    }
    try {
      progress(`${tag} deploy warmup: every agent's prompt to every replica`);
      await warmReplicas(fleet.urls, w, timeoutMs, fleet.model);
      progress(`${tag} probing the added latency (${o.probeN} tiny requests each way)`);
      const probe = await probeAddedLatency(router, fleet.urls, fleet.model, o.probeN);
      const before = await fleet.prefixCounters();
      const byReplicaBefore = await fleet.queriesByReplica();
      const engineBefore = await fleet.engineTimes();
      const cpuBefore = router.pid === null ? null : groupCpuSeconds(router.pid);
      const timesBefore = await router.times();
      const run = await runStrategy({
        url: router.url, strategy: s.name, workload: w, adjust: adjuster(s, router, fleet.model, o),
        maxDurationMs: o.maxDurationS * 1000, requestTimeoutMs: timeoutMs,
        onProgress: (p) => progress(`${tag} ${p.done}/${p.total} requests, ${p.inflight} in flight, ${(p.elapsedMs / 1000).toFixed(0)} s`),
      });
      const cpuAfter = router.pid === null ? null : groupCpuSeconds(router.pid);
      const timesAfter = await router.times();
      const after = await fleet.prefixCounters();
      const engineAfter = await fleet.engineTimes();
      const byReplica = (await fleet.queriesByReplica()).map((q, i) => q - byReplicaBefore[i]);
      const died = router.died();
      if (died) throw new Error(`${s.label}: ${died}`);
      if (byReplica.some((q) => q < 0)) throw new FleetChanged('a replica restarted during the run (its counters went back)');
      for (const r of run.records) (r as PeerRecord).round = round;
      const t = tallies.get(s.name) ?? {
        records: [], queries: 0, hits: 0, durationMs: 0, truncated: false, direct: [], via: [], probeFailed: 0, gateway: null, salted: false,
        perReplica: fleet.urls.map(() => 0), engine: noEngineTimes(), cpuS: 0, gatewayTimes: null,
      };
      t.records.push(...run.records);
      t.queries += after.queries - before.queries;
      t.hits += after.hits - before.hits;
      t.durationMs += run.durationMs;
      t.truncated ||= run.truncated;
      t.direct.push(...probe.direct);
      t.via.push(...probe.via);
      t.probeFailed += probe.failed;
      // warmroute's own histogram: the last round's (a fresh gateway each round).
      t.gateway = (await router.metrics()) ?? t.gateway;
      t.salted ||= !emptied;
      byReplica.forEach((q, i) => { t.perReplica[i] += q; });
      for (const k of Object.keys(t.engine) as (keyof EngineTimes)[]) {
        t.engine[k].sum += engineAfter[k].sum - engineBefore[k].sum;
        t.engine[k].count += engineAfter[k].count - engineBefore[k].count;
      }
      if (timesBefore !== null && timesAfter !== null) t.gatewayTimes = addTimes(t.gatewayTimes, timesBefore, timesAfter);
      t.cpuS = t.cpuS === null || cpuBefore === null || cpuAfter === null ? null : t.cpuS + (cpuAfter - cpuBefore);
      tallies.set(s.name, t);
    } finally {
      await router.stop();
    }
  }

  const records: TurnRecord[] = [];
  const summaries: PeerSummary[] = [];
  for (const s of o.strategies) {
    const t = tallies.get(s.name);
    if (!t) continue;
    records.push(...t.records);
    const summary = summarize({
      strategy: s.name, records: t.records, durationMs: t.durationMs, truncated: t.truncated, replicas: fleet.urls.length,
      budgetMs: o.budgetMs, counters: { queries: t.queries, hits: t.hits }, gateway: t.gateway, inflight: null,
    });
    const sum = t.perReplica.reduce((a, b) => a + b, 0);
    const mean = (p: PhaseTotal) => (p.count > 0 ? (p.sum / p.count) * 1000 : null);
    summaries.push({
      ...summary, label: s.label, added: addedFrom(t.direct, t.via, t.probeFailed), salted: t.salted, replicaShare: t.perReplica.map((q) => (sum ? q / sum : 0)),
      engine: { ttftMs: mean(t.engine.ttft), queueMs: mean(t.engine.queue), prefillMs: mean(t.engine.prefill) },
      routerCpuMsPerRequest: t.cpuS === null || t.records.length === 0 ? null : (t.cpuS * 1000) / t.records.length,
      gatewayMeansMs: t.gatewayTimes === null ? null : {
        ttft: mean(t.gatewayTimes.ttft),
        hops: Object.fromEntries(Object.entries(t.gatewayTimes.hops).flatMap(([h, p]) => { const m = mean(p); return m === null ? [] : [[h, m]]; })),
      },
    });
  }
  const { strategies, workload, ...rest } = o;
  return {
    kind: 'warmroute-peers-bench',
    when: new Date().toISOString(),
    machine: { cpus: cpus().length, cpu: cpus()[0]?.model ?? '?', node: process.version },
    fleet: { kind: fleet.kind, replicas: fleet.urls, model: fleet.model, ...o.fleetInfo },
    params: { ...rest, workload: base.options, strategies: strategies.map((x) => x.name), plannedRequests: plannedRequests(base) },
    summaries,
    skipped,
    aborted,
    records,
    wallMs: performance.now() - t0,
  };
}

function noEngineTimes(): EngineTimes {
  return { ttft: { sum: 0, count: 0 }, queue: { sum: 0, count: 0 }, prefill: { sum: 0, count: 0 } };
}

/** `into` plus what one run added (after − before). */
function addTimes(into: GatewayTimes | null, before: GatewayTimes, after: GatewayTimes): GatewayTimes {
  const out: GatewayTimes = into ?? { hops: {}, ttft: { sum: 0, count: 0 } };
  for (const [h, a] of Object.entries(after.hops)) {
    const b = before.hops[h] ?? { sum: 0, count: 0 };
    const o = (out.hops[h] ??= { sum: 0, count: 0 });
    o.sum += a.sum - b.sum;
    o.count += a.count - b.count;
  }
  out.ttft.sum += after.ttft.sum - before.ttft.sum;
  out.ttft.count += after.ttft.count - before.ttft.count;
  return out;
}
