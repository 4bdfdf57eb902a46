// One benchmark run: a fleet, then for each strategy a fresh gateway over the same fleet with its
// caches reset (the oracle: no gateway, each session straight to its replica), the same workload,
// the figures. Shared by `npm run bench:voice` and `npm run demo`.

import { cpus } from 'node:os';
import { mulberry32 } from '../../src/prng.js';
import { startRedis } from '../../test/store/redis-server.js';
import { startGateway, gatewayMetrics, sampleInflight, startSimFleet, type Fleet, type GatewayMetrics, type KvEndpoint } from './fleet.js';
import { checkGoals, oracleMixesAgents, type Goal } from './goals.js';
import { idealHits } from './ideal.js';
import { gatewaysOf, inflightFromRecords, ORACLE, oraclePlan, oracleTargets, replicaName, viaGateway } from './oracle.js';
import { plannedRequests, runStrategy, type RunOptions, type StrategyRun, type TurnRecord } from './run.js';
import { summarize, type StrategySummary } from './summary.js';
import { underPressure, warmPlanned, warmReplicas, warmThroughGateway } from './warmup.js';
import type { AgentKind } from './orchestrated.js';
import type { ClientTurn } from './orchestrated.js';
import { attachGatewayTurns, summarizeTurns, turnsConfig } from './turn-stats.js';
import type { Api } from './dialogue.js';
import { buildWorkload, type WorkloadOptions } from './workload.js';

/** warmroute reading every replica's KV events (the simulator publishes them): exact residency. */
export const WITH_KV_EVENTS = 'warmroute-events';

// The oracle last: the reference the routers are read against.
export const STRATEGIES = ['round-robin', 'least-loaded', 'session-hash', 'affinity', WITH_KV_EVENTS, ORACLE] as const;

/** The simulator's KV blocks per replica when --kv-blocks is not given (its H100 default). */
const SIM_DEFAULT_KV_BLOCKS = 24_576;

export { gatewaysOf };

export interface BenchOptions {
  workload: Partial<WorkloadOptions>;
  /** chat completions, or the Responses API (keyed sessions by previous_response_id, keyless ones resending their history). Default chat. */
  api?: Api;
  /** The single-prompt agent (default) or the orchestrated one: 0–6 calls per turn (orchestrated.ts). */
  agent?: AgentKind;
  replicas: number;
  strategies: readonly string[];
  /** The simulator's natural answer length in tokens (`--output-tokens`). */
  outputTokens: [number, number];
  /** KV blocks per replica (16 tokens each); undefined = the simulator's H100 default (24,576). */
  kvBlocks?: number;
  /** Cap per strategy: no new turn starts after it. */
  maxDurationS: number;
  requestTimeoutS: number;
  budgetMs: number;
  /** Send every agent's system prompt to every replica before the sessions (the report's deploy warmup). */
  warmup: boolean;
  /**
   * An OTLP/HTTP collector's base URL (http/json): the simulated replicas and each strategy's one
   * gateway export their spans there (the affinity@N gateways do not), and every request carries a
   * traceparent of its own (the record's traceId).
   */
  traces?: string;
}

export interface BenchResult {
  kind: 'warmroute-voice-bench';
  when: string;
  machine: { cpus: number; cpu: string; node: string };
  params: BenchOptions & { workload: WorkloadOptions; plannedRequests: number };
  summaries: StrategySummary[];
  goals: Goal[];
  records: TurnRecord[];
  /** Every caller turn of every strategy, the client's and the gateway's figures side by side (absent in older results). */
  turns?: ClientTurn[];
  wallMs: number;
  /** The agents' prompts together do not fit one replica's KV cache (warmup.ts underPressure). */
  pressure?: boolean;
}

export type Progress = (line: string) => void;

export async function runBench(o: BenchOptions, progress: Progress): Promise<BenchResult> {
  const t0 = performance.now();
  const workload = buildWorkload(o.workload);
  const planned = plannedRequests(workload);
  const summaries: StrategySummary[] = [];
  const records: TurnRecord[] = [];
  const turns: ClientTurn[] = [];
  const gatewayConfig = {
    ...turnsConfig(workload.options.thinkMs[1], o.budgetMs),
    ...(o.traces ? { tracing: { endpoint: o.traces, protocol: 'http/json', batch: { scheduledDelayMs: 200 } } } : {}),
  };
  let fleet: Fleet | null = null;
  let via: Via | null = null;
  const pressure = underPressure(workload, o.kvBlocks ?? SIM_DEFAULT_KV_BLOCKS);
  try {
    progress(`starting ${o.replicas} simulated vLLM replicas`);
    fleet = await startSimFleet(o.replicas, o.outputTokens, o.kvBlocks, o.strategies.includes(WITH_KV_EVENTS), 0, o.traces ? `${o.traces}/v1/traces` : undefined);
    for (const [k, strategy] of o.strategies.entries()) {
      const tag = `[${k + 1}/${o.strategies.length} ${strategy}]`;
      progress(viaGateway(strategy) ? `${tag} starting the gateway` : `${tag} no gateway: session i straight to replica i mod ${o.replicas}`);
      via = !viaGateway(strategy) ? direct(fleet.urls, workload.sessions.length)
        : gatewaysOf(strategy) > 1 ? await throughGateways(fleet.urls, gatewaysOf(strategy), workload.options.seed)
          : strategy === WITH_KV_EVENTS ? await throughGateway(fleet.urls, 'affinity', fleet.kvEvents, gatewayConfig)
            : await throughGateway(fleet.urls, strategy, null, gatewayConfig);
      await fleet.reset();
      const timeout = o.requestTimeoutS * 1000;
      let warm: Awaited<ReturnType<typeof warmReplicas>> = [];
      if (o.warmup && !pressure) {
        progress(`${tag} warming every replica with every agent's system prompt`);
        warm = await warmReplicas(fleet.urls, workload, timeout);
      } else if (o.warmup && via.target.direct) {
        progress(`${tag} under KV pressure: warming each replica with the agents its plan sends it`);
        warm = await warmPlanned(fleet.urls, oraclePlan(workload.sessions.length, fleet.urls.length), workload, timeout);
      } else if (o.warmup) {
        progress(`${tag} under KV pressure: warming each agent once, through the gateway`);
        warm = await warmThroughGateway((via.target.url ?? via.target.urls?.[0]) as string, workload, timeout);
      }
      const before = await fleet.prefixCounters();
      via.watch(o.maxDurationS * 1000 + o.requestTimeoutS * 1000);
      const run = await runStrategy({
        ...via.target, strategy, workload, api: o.api, voiceAgent: o.agent, traced: o.traces !== undefined,
        maxDurationMs: o.maxDurationS * 1000,
        requestTimeoutMs: o.requestTimeoutS * 1000,
        onProgress: (p) => progress(`${tag} ${p.done}/${p.total} requests, ${p.inflight} in flight, ${(p.elapsedMs / 1000).toFixed(0)} s`),
      });
      const { inflight, gateway } = await via.finish(run);
      // The gateway's own turn figures, read once its sessions' last turns closed (idle bound).
      if (via.adminUrl) await attachGatewayTurns(via.adminUrl, run.turns, workload.options.thinkMs[1] + 10_000);
      turns.push(...run.turns);
      const after = await fleet.prefixCounters();
      await via.stop();
      via = null;
      const ideal = idealHits(run.sent.filter((_, i) => run.records[i].ok), warm);
      run.records.filter((r) => r.ok).forEach((r, i) => { r.idealCachedTokens = ideal.cached[i]; });
      records.push(...run.records);
      summaries.push({
        ...summarize({
          strategy, records: run.records, durationMs: run.durationMs, truncated: run.truncated, replicas: o.replicas,
          budgetMs: o.budgetMs, counters: { queries: after.queries - before.queries, hits: after.hits - before.hits },
          gateway, inflight, direct: !viaGateway(strategy),
        }),
        turns: summarizeTurns(run.turns, run.records, o.budgetMs),
      });
    }
  } finally {
    await via?.stop();
    await fleet?.stop();
  }
  return {
    kind: 'warmroute-voice-bench',
    when: new Date().toISOString(),
    machine: { cpus: cpus().length, cpu: cpus()[0]?.model ?? '?', node: process.version },
    params: { ...o, workload: workload.options, plannedRequests: planned },
    summaries,
    // Beating the oracle is a goal only where its i mod R splits agents over replicas while the
    // caches cannot hold every agent everywhere: with room everywhere, splitting costs nothing.
    goals: checkGoals(summaries, { oracleMixesAgents: pressure && oracleMixesAgents(workload.sessions.length, workload.options.groups, o.replicas) }),
    pressure,
    records,
    turns,
    wallMs: performance.now() - t0,
  };
}

type Inflight = { peak: Record<string, number>; mean: Record<string, number> };

/** What a strategy's requests go through, and what is read from it around the run. */
interface Via {
  target: Pick<RunOptions, 'url' | 'urls' | 'random' | 'direct'>;
  /** One gateway's admin port, where its turn figures are read (record/turns.ts). */
  adminUrl?: string;
  /** Starts watching the replicas' in-flight requests (bounded by `maxMs`). */
  watch(maxMs: number): void;
  finish(run: StrategyRun): Promise<{ inflight: Inflight; gateway: GatewayMetrics | null }>;
  stop(): Promise<void>;
}

/** A fresh gateway child, so no routing state carries over from the previous strategy. */
async function throughGateway(urls: string[], strategy: string, kvEvents: KvEndpoint[] | null, config: Record<string, unknown>): Promise<Via> {
  const gw = await startGateway(urls, strategy, [], kvEvents, config);
  let sampler: ReturnType<typeof sampleInflight> | null = null;
  return {
    target: { url: gw.url },
    adminUrl: gw.adminUrl,
    watch(maxMs) { sampler = sampleInflight(gw.adminUrl, 250, maxMs); },
    async finish() {
      const inflight = sampler ? await sampler.stop() : { peak: {}, mean: {} };
      const died = gw.died();
      if (died) throw new Error(`the ${strategy} gateway ${died}`);
      return { inflight, gateway: await gatewayMetrics(gw.adminUrl) };
    },
    stop: () => gw.stop(),
  };
}

/** Several warmroute children on one redis-server; each request to one of them at random (seeded). */
async function throughGateways(urls: string[], n: number, seed: number): Promise<Via> {
  const redis = await startRedis();
  const gws = await Promise.all(Array.from({ length: n }, () => startGateway(urls, 'affinity', ['--redis', redis.url])));
  return {
    target: { urls: gws.map((g) => g.url), random: mulberry32(seed + 7) },
    watch() { /* the records are the watch: see finish() */ },
    async finish(run) {
      for (const g of gws) {
        const died = g.died();
        if (died) throw new Error(`a gateway of ${n} ${died}`);
      }
      // In flight per replica through all N gateways together, from the client's records at the
      // single gateway's 250 ms cadence: each request counts on the replica that answered it from
      // its send to its end. Polling each gateway apart cannot give this (their peaks need not
      // coincide; a sum of them is only an upper bound), and the records see every request.
      const inflight = inflightFromRecords(run.records, urls.map(replicaName), run.durationMs, 250);
      // Overhead quantiles from the N gateways' histograms merged, decisions summed.
      return { inflight, gateway: await gatewayMetrics(gws.map((g) => g.adminUrl)) };
    },
    async stop() {
      await Promise.all(gws.map((g) => g.stop()));
      await redis.kill();
    },
  };
}

/** The oracle: nothing between the client and the replicas; in flight counted from the records. */
function direct(urls: string[], sessions: number): Via {
  return {
    target: { direct: oracleTargets(sessions, urls) },
    watch() { /* the records are the watch */ },
    finish: async (run) => ({ inflight: inflightFromRecords(run.records, urls.map(replicaName), run.durationMs, 250), gateway: null }),
    stop: async () => {},
  };
}
