// One socket row: G warmroute processes (the built gateway, each its own event loop) sharing one
// redis-server, in front of the light simulated fleet (many replicas in one process, short
// answers), the voice sessions through them at random, each request to one pod (seeded), as
// bench:voice runs affinity@N. The oracle row sends each session straight to replica i mod R.
// Around the run: the pods' CPU while idle, then over the run; their memory; Redis's commands and
// memory; the replicas' prefix-cache counters; what the pods read of the KV events.

import { mulberry32 } from '../../src/prng.js';
import { startRedis, type RedisChild } from '../../test/store/redis-server.js';
import { startGateway, type Fleet, type Gateway } from '../voice/fleet.js';
import { oracleTargets } from '../voice/oracle.js';
import { runStrategy, type StrategyRun } from '../voice/run.js';
import { cpuSecondsOfAll, kvEventCounts, memoryOf, redisInfo, sleep } from './measure.js';
import { runFigures, type ScaleRow } from './rows.js';
import { buildScaleWorkload, type ScaleWorkloadOptions } from './workload.js';

/** A gateway's bound to see every replica up: 256 replicas on two busy cores take tens of seconds. */
const READY_MS = 90_000;

export interface SocketRowOptions {
  fleet: Fleet;
  strategy: 'affinity' | 'oracle';
  pods: number;
  kvEvents: boolean;
  workload: ScaleWorkloadOptions;
  maxDurationS: number;
  requestTimeoutS: number;
  /** Seconds the pods are measured idle before the run. */
  idleS: number;
  /** A fault injected once `at` of the planned requests are done (faults.ts). */
  fault?: { at: number; inject(ctx: FaultContext): Promise<void> };
}

/** What a fault may act on while the run goes on. */
export interface FaultContext {
  gateways: Gateway[];
  /** The pods' URLs the client picks from: a killed pod's is taken out, as a Service does. */
  urls: string[];
  redis: RedisChild | null;
  /** ms since the run started (the records' clock). */
  elapsedMs(): number;
}

export interface SocketRowResult {
  row: ScaleRow;
  run: StrategyRun;
  /** The fault's time in the records' clock (ms after the run started), if one was injected. */
  faultAtMs: number | null;
}

/**
 * Start-up work is not idle work: module loading, the first probes and scrapes, every KV-event
 * stream connecting and replaying (seconds at 256 replicas). Waits, in one-second windows and for
 * at most 15 s, until the pods' CPU rate stops falling: two windows in a row within 20% (or 2 ms/s).
 */
async function settle(pids: readonly number[], progress: (line: string) => void, tag: string): Promise<void> {
  progress(`${tag} waiting for the pods' start-up work to end`);
  let last = Number.POSITIVE_INFINITY;
  for (let i = 0; i < 15; i++) {
    const c0 = cpuSecondsOfAll(pids);
    await sleep(1000);
    const rate = (cpuSecondsOfAll(pids) - c0) * 1000;
    if (Math.abs(rate - last) <= Math.max(0.2 * last, 2 * pids.length)) return;
    last = rate;
  }
}

export async function runSocketRow(o: SocketRowOptions, progress: (line: string) => void): Promise<SocketRowResult> {
  const t0 = performance.now();
  const workload = buildScaleWorkload(o.workload);
  const replicas = o.fleet.urls.length;
  const tag = `[socket R=${replicas} ${o.strategy === 'oracle' ? 'oracle' : `G=${o.pods}`} S=${o.workload.sessions}${o.kvEvents ? ' events' : ''}${o.fault ? ' fault' : ''}]`;
  const redis = o.strategy === 'oracle' ? null : await startRedis();
  const gateways: Gateway[] = [];
  try {
    if (redis) {
      progress(`${tag} starting ${o.pods} gateway(s)`);
      // One after the other: each start probes and scrapes every replica, and eight at once on two
      // cores can miss startGateway's readiness bound at 64 replicas and more.
      for (let g = 0; g < o.pods; g++) gateways.push(await startGateway(o.fleet.urls, 'affinity', ['--redis', redis.url], o.kvEvents ? o.fleet.kvEvents : null, o.kvEvents ? {} : null, READY_MS));
    }
    await o.fleet.reset();
    const pids = gateways.map((g) => g.pid).filter((p): p is number => p !== null);
    let idleCpuS = 0;
    let idleSpan = 1;
    if (pids.length > 0) {
      await settle(pids, progress, tag);
      const idle0 = cpuSecondsOfAll(pids);
      const idleT0 = performance.now();
      progress(`${tag} measuring the pods idle for ${o.idleS} s`);
      await sleep(o.idleS * 1000);
      idleCpuS = cpuSecondsOfAll(pids) - idle0;
      idleSpan = (performance.now() - idleT0) / 1000;
    }
    const client = redis?.client() ?? null;
    const redis0 = client ? await redisInfo(client) : null;
    const kv0 = o.kvEvents && gateways.length > 0 ? await kvEventCounts(gateways[0].adminUrl) : null;
    const counters0 = await o.fleet.prefixCounters();
    const cpu0 = cpuSecondsOfAll(pids);
    const urls = gateways.map((g) => g.url);
    let faultAtMs: number | null = null;
    let faultDone: Promise<void> = Promise.resolve();
    const total = workload.sessions.reduce((n, s) => n + s.turns.length, 0);
    const runT0 = performance.now();
    const run = await runStrategy({
      ...(o.strategy === 'oracle' ? { direct: oracleTargets(workload.sessions.length, o.fleet.urls) } : { urls, random: mulberry32(o.workload.seed + 7) }),
      strategy: o.strategy === 'oracle' ? 'oracle' : `affinity@${o.pods}`,
      workload,
      maxDurationMs: o.maxDurationS * 1000,
      requestTimeoutMs: o.requestTimeoutS * 1000,
      onProgress(p) {
        progress(`${tag} ${p.done}/${p.total} requests, ${p.inflight} in flight, ${(p.elapsedMs / 1000).toFixed(0)} s`);
        if (o.fault && faultAtMs === null && p.done >= o.fault.at * total) {
          faultAtMs = p.elapsedMs;
          faultDone = o.fault.inject({ gateways, urls, redis, elapsedMs: () => performance.now() - runT0 });
        }
      },
    });
    await faultDone;
    const cpuS = cpuSecondsOfAll(pids) - cpu0;
    const counters1 = await o.fleet.prefixCounters();
    const live = gateways.filter((g) => g.died() === null);
    const mems = live.map((g) => (g.pid === null ? null : memoryOf(g.pid))).filter((m) => m !== null);
    // A pod too busy to answer its /metrics in time loses this figure, not the row.
    const kv1 = kv0 && live.length > 0 ? await kvEventCounts(live[0].adminUrl).catch(() => null) : null;
    const redis1 = client ? await redisInfo(client).catch(() => null) : null;
    const f = runFigures(run.records, run.sent, { queries: counters1.queries - counters0.queries, hits: counters1.hits - counters0.hits });
    const durationS = run.durationMs / 1000;
    const idleRate = pids.length > 0 ? idleCpuS / idleSpan / pids.length : 0;
    const row: ScaleRow = {
      kind: 'socket', strategy: o.strategy, replicas, pods: o.strategy === 'oracle' ? 0 : o.pods, sessions: o.workload.sessions, kvEvents: o.kvEvents,
      requests: f.requests, errors: f.errors, errorKinds: f.errorKinds, truncated: run.truncated, hitRate: f.hitRate, idealHitRate: f.idealHitRate,
      ttftP50Ms: f.ttft.p50, ttftP90Ms: f.ttft.p90, ttftP99Ms: f.ttft.p99, p90VsOnePod: null, p90VsOracle: null,
      durationS, wallS: (performance.now() - t0) / 1000,
    };
    if (gateways.length > 0) {
      // A restarted Redis counts from zero: its before/after delta means nothing then.
      const redisOk = redis0 !== null && redis1 !== null && redis1.commands >= redis0.commands;
      row.socket = {
        cpuMsPerRequest: ((cpuS - idleRate * pids.length * durationS) * 1000) / Math.max(1, f.requests),
        cpuMsPerRequestRaw: (cpuS * 1000) / Math.max(1, f.requests),
        idleCpuMsPerSecond: idleRate * 1000,
        rssMbPerPod: Math.max(0, ...mems.map((m) => m.rssMb)),
        peakRssMbPerPod: Math.max(0, ...mems.map((m) => m.peakMb)),
        redisCommandsPerRequest: redisOk ? (redis1.commands - redis0.commands) / Math.max(1, f.requests) : null,
        redisMemoryMb: redis1 ? redis1.usedMemoryBytes / 2 ** 20 : null,
        kvEventsPerSecond: kv0 && kv1 ? (kv1.events - kv0.events) / durationS : 0,
        kvBlocksTracked: kv1?.blocks ?? 0,
        kvEventCpuMsPerSecond: null,
      };
    }
    return { row, run, faultAtMs };
  } finally {
    await Promise.all(gateways.map((g) => g.stop()));
    await redis?.kill();
  }
}
