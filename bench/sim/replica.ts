// One simulated vLLM replica: a node:http server, an engine, a KV pool, metrics and faults.

import { createServer, type Server, type ServerResponse } from 'node:http';
import { attachRealtime, type Realtime } from './realtime.js';
import type { AddressInfo } from 'node:net';
import { resolveConfig, type SimConfig, type SimReplicaOptions } from './config.js';
import { createEngine, type EngineHooks } from './engine.js';
import { createFaultState, type Fault, type FaultKind } from './faults.js';
import type { AbortRecord, GenContext, RequestRecord, SimCounters } from './generate.js';
import { createBlockPool } from './kv-cache.js';
import { startKvPublisher, type SimKvPublisher } from './kv-events.js';
import { createLoraState, type LoraState } from './lora.js';
import { createResponseStore } from './response-store.js';
import { createMetrics, type Metrics } from './metrics.js';
import { createRequestHandler } from './routes.js';
import { createSimTracer, type SimTracer } from './tracing.js';

export interface ReplicaCounters {
  /** Generation requests that passed validation. */
  requests: number;
  running: number;
  waiting: number;
  finished: number;
  /** Client disconnects that reached the replica before the answer was complete. */
  aborted: number;
  /** Date.now() of the last such disconnect, or null. */
  lastAbortAt: number | null;
  aborts: AbortRecord[];
  /** vllm:prefix_cache_queries / hits: tokens looked up / found, at first admission. */
  prefixCacheQueries: number;
  prefixCacheHits: number;
  promptTokens: number;
  generationTokens: number;
  preemptions: number;
  kvUsage: number;
  cachedBlocks: number;
  /** Requests answered with an error status by the replica (4xx/5xx). */
  rejected: number;
  stalled: number;
  diedMidStream: number;
}

export interface SimReplica {
  name: string;
  url: string;
  port: number;
  config: Readonly<SimConfig>;
  fault(f: Fault): void;
  clearFaults(kind?: FaultKind): void;
  faults(): Fault[];
  counters(): ReplicaCounters;
  /** Most recent requests, oldest first (at most 1000). */
  requests(): RequestRecord[];
  /** Empty the KV cache and zero every counter; in-flight requests are dropped. */
  reset(): void;
  /** Its KV event publisher (--kv-events), or null. */
  kvEvents: SimKvPublisher | null;
  /** Its realtime transcription endpoint (`/v1/realtime`): open connections, utterances done. */
  realtime: Pick<Realtime, 'open' | 'done'>;
  /** Runtime LoRA loads and unloads it answered. */
  loraCalls(): { load: number; unload: number };
  close(): Promise<void>;
}

const LOG_REQUESTS = 1000;

function listen(server: Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (e: Error) => reject(e);
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

function freshCounters(): SimCounters {
  return { requests: 0, finished: 0, aborted: 0, aborts: [], rejected: 0, stalled: 0, diedMidStream: 0 };
}

function engineHooks(metrics: Metrics, cfg: SimConfig, tracer: SimTracer | null, lora: LoraState): EngineHooks {
  const st = () => metrics.state;
  return {
    onAdmit(seq, queried, hits, first) {
      if (!first) return; // vLLM books recomputation after preemption separately
      tracer?.scheduled(seq);
      if (cfg.enablePrefixCaching) {
        st().prefixCacheQueries += queried;
        st().prefixCacheHits += hits;
      }
      st().queue.observe((performance.now() - seq.engineArrivalMs) / 1000);
    },
    onFirstToken(seq) {
      st().ttft.observe((seq.firstTokenMs - seq.engineArrivalMs) / 1000);
      st().promptTokens += seq.promptLen;
    },
    onToken() {
      st().generationTokens++;
    },
    onFinish(seq, reason) {
      st().success[reason]++;
      if (reason !== 'abort') st().e2e.observe((performance.now() - seq.engineArrivalMs) / 1000);
    },
    onPreempt() {
      st().preemptions++;
    },
    mayAdmit: lora.enabled ? (seq, running) => lora.admits(seq, running) : undefined,
  };
}

export async function startReplica(opts: SimReplicaOptions = {}, index = 0): Promise<SimReplica> {
  const cfg = resolveConfig(opts, index);
  const kv = opts.kvEvents ? await startKvPublisher(cfg.host, opts.kvEvents === true ? {} : opts.kvEvents) : null;
  const pool = createBlockPool(cfg.kvBlocks, kv?.sink ?? null, cfg.blockSize, cfg.kvModel);
  const metrics = createMetrics(cfg);
  const tracer = opts.otlpTracesEndpoint ? createSimTracer(opts.otlpTracesEndpoint, cfg.name) : null;
  const lora = createLoraState(cfg);
  const engine = createEngine(cfg, pool, engineHooks(metrics, cfg, tracer, lora));
  const faults = createFaultState();
  const log: RequestRecord[] = [];
  const live = new Set<ServerResponse>();
  const held = new Set<ServerResponse>();
  let crashed = false;
  let closed = false;
  let recoverTimer: NodeJS.Timeout | null = null;
  const gen: GenContext = {
    cfg,
    engine,
    faults,
    counters: freshCounters(),
    inFrontend: { n: 0 },
    epoch: { n: 0 },
    responses: createResponseStore(),
    tracer,
    lora,
    record(r) {
      log.push(r);
      if (log.length > LOG_REQUESTS) log.shift();
    },
  };

  const counters = (): ReplicaCounters => {
    const s = metrics.state;
    const c = gen.counters;
    return {
      requests: c.requests,
      running: engine.running(),
      waiting: engine.waiting(),
      finished: c.finished,
      aborted: c.aborted,
      lastAbortAt: c.aborts.length > 0 ? c.aborts[c.aborts.length - 1].at : null,
      aborts: c.aborts.slice(),
      prefixCacheQueries: s.prefixCacheQueries,
      prefixCacheHits: s.prefixCacheHits,
      promptTokens: s.promptTokens,
      generationTokens: s.generationTokens,
      preemptions: s.preemptions,
      kvUsage: pool.usage(),
      cachedBlocks: pool.cachedCount(),
      rejected: c.rejected,
      stalled: c.stalled,
      diedMidStream: c.diedMidStream,
    };
  };

  /** Drop every connection-bound request without booking client aborts. */
  const dropInFlight = () => {
    gen.epoch.n++;
    for (const res of [...live, ...held]) res.destroy();
    // Upgraded sockets are no longer the HTTP server's: a dead process drops them too.
    realtime.dropAll();
    engine.reset();
  };

  /**
   * A new process: nothing in flight survives, the KV cache and the response store start empty,
   * and process_start_time_seconds moves on. Shared by `recover` and `restart`; each decides
   * for itself whether the /metrics counters start over too.
   */
  const newProcess = () => {
    dropInFlight();
    kv?.restart();
    gen.responses.clear();
    metrics.restarted();
  };

  const reset = () => {
    dropInFlight();
    kv?.restart();
    gen.responses.clear();
    gen.counters = freshCounters();
    metrics.reset();
    log.length = 0;
  };

  const server = createServer({ keepAliveTimeout: 5000 }, (req, res) => handler(req, res));
  // 1,280 samples: 80 ms of 16 kHz audio per transcribed token.
  const realtime = attachRealtime(server, { stepMs: cfg.stepBaseMs, samplesPerToken: 1280, model: cfg.model });
  const port = await listen(server, cfg.port, cfg.host);

  const crash = (f: Extract<Fault, { kind: 'crash' }>) => {
    if (crashed || closed) return;
    crashed = true;
    faults.set(f);
    server.close();
    server.closeAllConnections();
    dropInFlight();
    if (f.recoverAfterMs !== undefined) recoverTimer = setTimeout(recover, f.recoverAfterMs);
  };
  const recover = () => {
    if (recoverTimer) clearTimeout(recoverTimer);
    recoverTimer = null;
    if (!crashed || closed) return;
    crashed = false;
    faults.clear('crash');
    // The /metrics counters persist (README: so tests can still read them after a crash).
    newProcess();
    server.listen(port, cfg.host);
  };

  const replica: SimReplica = {
    name: cfg.name,
    url: `http://${cfg.host.includes(':') ? `[${cfg.host}]` : cfg.host}:${port}`,
    port,
    config: Object.freeze({ ...cfg }),
    loraCalls: () => ({ ...lora.calls }),
    fault(f) {
      if (f.kind === 'crash') return crash(f);
      if (f.kind === 'recover') return recover();
      if (f.kind === 'restart') {
        // Quicker than any health check, and the /metrics counters start over, as a real restart's.
        metrics.reset();
        newProcess();
        return;
      }
      if (f.kind === 'slow') engine.setSlowFactor(f.factor ?? 4);
      faults.set(f);
    },
    clearFaults(kind) {
      if (!kind || kind === 'crash') recover();
      if (!kind || kind === 'slow') engine.setSlowFactor(1);
      faults.clear(kind);
    },
    faults: () => faults.list(),
    counters,
    requests: () => log.slice(),
    reset,
    kvEvents: kv,
    realtime: { open: realtime.open, done: realtime.done },
    async close() {
      if (closed) return;
      closed = true;
      kv?.close();
      if (recoverTimer) clearTimeout(recoverTimer);
      dropInFlight();
      engine.stop();
      // The spans of finished requests still queued go out before the replica is gone.
      await tracer?.shutdown().catch(() => {});
      await realtime.close();
      await new Promise<void>((resolve) => {
        if (!server.listening) return resolve();
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };

  const handler = createRequestHandler({
    gen,
    metricsText: () => metrics.render({ running: engine.running(), waiting: engine.waiting(), kvUsage: pool.usage() }) + lora.metricsText(),
    state: () => ({
      name: cfg.name,
      url: replica.url,
      model: cfg.model,
      faults: faults.list(),
      counters: counters(),
      config: cfg,
      kvEvents: kv === null ? null : { endpoint: kv.endpoint, replayEndpoint: kv.replayEndpoint, topic: kv.topic },
    }),
    fault: (f) => replica.fault(f),
    clearFaults: (k) => replica.clearFaults(k),
    reset,
    live,
    held,
  });

  for (const f of opts.faults ?? []) replica.fault(f);
  return replica;
}
