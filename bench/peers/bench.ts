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
import type { PeerFleet } from './fleet.js';
import { probeAddedLatency, type AddedLatency } from './probe.js';
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
}

export interface PeersResult {
  kind: 'warmroute-peers-bench';
  when: string;
  machine: { cpus: number; cpu: string; node: string };
  fleet: { kind: string; replicas: string[]; model: string } & Record<string, unknown>;
  params: Omit<PeersOptions, 'strategies' | 'workload'> & { workload: WorkloadOptions; strategies: string[]; plannedRequests: number };
  summaries: PeerSummary[];
  /** Routers that could not be started, and why: the run goes on without them. */
  skipped: { name: string; label: string; reason: string }[];
  records: TurnRecord[];
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
  return (session: SessionPlan, req: DialogueRequest) => {
    Object.assign(req.headers, router.headers);
    if (s.sessionHeader && session.keyMode !== 'none') req.headers[s.sessionHeader] = session.id;
    req.body.model = model;
    if (o.maxTokens !== null) req.body.max_tokens = o.maxTokens;
    if (!o.tools) delete req.body.tools;
  };
}

export async function runPeers(fleet: PeerFleet, o: PeersOptions, progress: (line: string) => void): Promise<PeersResult> {
  const t0 = performance.now();
  const base = buildWorkload(o.workload);
  const summaries: PeerSummary[] = [];
  const records: TurnRecord[] = [];
  const skipped: PeersResult['skipped'] = [];
  const timeoutMs = o.requestTimeoutS * 1000;
  for (const [k, s] of o.strategies.entries()) {
    const tag = `[${k + 1}/${o.strategies.length} ${s.name}]`;
    const emptied = await fleet.reset();
    const w = workloadFor(base, s, emptied ? null : `run ${k + 1} of ${o.strategies.length}`, o.tools);
    progress(`${tag} starting ${s.label}`);
    let router: RunningRouter;
    try {
      router = await s.start(fleet.urls, fleet.model);
    } catch (e) {
      const reason = (e as Error).message;
      progress(`${tag} could not be started, skipped: ${reason.split('\n')[0]}`);
      skipped.push({ name: s.name, label: s.label, reason });
      continue;
    }
    try {
      progress(`${tag} deploy warmup: every agent's prompt to every replica`);
      await warmReplicas(fleet.urls, w, timeoutMs, fleet.model);
      progress(`${tag} probing the added latency (${o.probeN} tiny requests each way)`);
      const added = await probeAddedLatency(router, fleet.urls, fleet.model, o.probeN);
      const before = await fleet.prefixCounters();
      const run = await runStrategy({
        url: router.url, strategy: s.name, workload: w, adjust: adjuster(s, router, fleet.model, o),
        maxDurationMs: o.maxDurationS * 1000, requestTimeoutMs: timeoutMs,
        onProgress: (p) => progress(`${tag} ${p.done}/${p.total} requests, ${p.inflight} in flight, ${(p.elapsedMs / 1000).toFixed(0)} s`),
      });
      const after = await fleet.prefixCounters();
      const died = router.died();
      if (died) throw new Error(`${s.label}: ${died}`);
      records.push(...run.records);
      const summary = summarize({
        strategy: s.name, records: run.records, durationMs: run.durationMs, truncated: run.truncated, replicas: fleet.urls.length,
        budgetMs: o.budgetMs, counters: { queries: after.queries - before.queries, hits: after.hits - before.hits },
        gateway: await router.metrics(), inflight: null,
      });
      summaries.push({ ...summary, label: s.label, added, salted: !emptied });
    } finally {
      await router.stop();
    }
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
    records,
    wallMs: performance.now() - t0,
  };
}
