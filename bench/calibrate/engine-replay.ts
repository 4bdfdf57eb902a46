// A recorded trace replayed through the simulator's engine and block pool in virtual time: each
// request reaches the replica the real run chose, at the time it was sent, with its real prompt
// and output token ids, so the only thing that can differ from the recording is the replica model
// itself (what it caches, evicts and admits, and how long its steps take).

import { createVirtualClock } from '../scale/des/clock.js';
import { resolveConfig, type SimConfig, type SimReplicaOptions, type TimingKnobs } from '../sim/config.js';
import { createEngine, type Engine, type EngineClock } from '../sim/engine.js';
import { createBlockPool, type KvModel } from '../sim/kv-cache.js';
import { createSeq, NO_SALT_ROOT, type Seq } from '../sim/sequence.js';
import { frontendMs } from '../sim/timing.js';
import type { Trace, TraceRequest } from './trace.js';

/**
 * The project's real fleet replica: the tiny random-weight Llama of bench/real/make-model.py on
 * vLLM 0.32's CPU backend, one OpenMP thread, two replicas on two shared cores. Fitted to the
 * recorded runs' TTFTs (docs/benchmarks/calibration.md): a cold 1.5K-token prefill ≈ 0.4 s, a
 * warm one ≈ 70 ms, a decode step ≈ 12 ms.
 */
export const CPU_TINY_TIMING: Readonly<TimingKnobs> = Object.freeze({
  frontendMs: 12,
  tokenizeMsPerToken: 0.008,
  stepBaseMs: 10,
  prefillMsPerToken: 0.2,
  attnMsPerTokenPair: 0,
  decodeMsPerSeq: 1.5,
  decodeMsPerCtxToken: 0,
});

export interface ReplayOptions {
  timing: Readonly<TimingKnobs>;
  kvModel: KvModel;
  /** The replicas' --max-model-len (the real fleet's 4,608). */
  maxModelLen?: number;
}

export interface EngineReplay {
  requests: ReplayedRequest[];
  /** Blocks each simulated replica stored and evicted, as its KV events would say. */
  kvEvents: { stored: number; removed: number }[];
}

export interface ReplayedRequest {
  /** Cached tokens at first admission, as usage reports them; null for a request the trace has no replica for. */
  cachedTokens: number | null;
  ttftMs: number | null;
}

/** A simulated replica of the trace's capacities and batch limits, with `timing` and `kvModel`. */
export function traceReplicaOptions(trace: Trace, o: ReplayOptions & { name: string; model?: string }): SimReplicaOptions {
  return {
    ...o.timing, name: o.name, ...(o.model ? { model: o.model } : {}), kvModel: o.kvModel,
    blockSize: trace.engine.blockSize, kvBlocks: trace.engine.kvBlocks,
    maxNumBatchedTokens: trace.engine.maxNumBatchedTokens, maxNumSeqs: trace.engine.maxNumSeqs,
    // The real fleet's --max-model-len, or what the usable blocks hold when that is less.
    maxModelLen: o.maxModelLen ?? Math.min(4608, (trace.engine.kvBlocks - 1) * trace.engine.blockSize),
  };
}

/**
 * Serves a recorded request on a simulated engine, now: its own prompt ids, and its recorded
 * answer's ids as what the engine generates (so every block it caches is one vLLM cached), after
 * the replica's frontend delay. `first` runs at its first token with the cached tokens.
 */
export function serveRecorded(clock: EngineClock, cfg: SimConfig, engine: Engine, r: TraceRequest, id: string, sink: { first(cached: number): void; done(): void }): void {
  const arrival = clock.now();
  const ids = r.outputIds.length > 0 ? r.outputIds : [0];
  const seq: Seq = createSeq({
    id, prompt: [...r.promptIds], root: NO_SALT_ROOT,
    plan: { ids, deltas: ids.map(() => ({ t: 'none' as const })), finish: 'stop' },
    maxOut: ids.length, httpArrivalMs: arrival,
    sink: {
      onToken(s, index) {
        if (index === 0) sink.first(Math.max(0, s.cachedTokens));
      },
      onFinish: () => sink.done(),
    },
  });
  const due = arrival + frontendMs(cfg, r.promptIds.length);
  clock.setTimeout(() => engine.submit(seq, due), due - arrival);
}

/** Per request of the trace, in its order: what the simulated replica would have served. */
export function replayEngine(trace: Trace, o: ReplayOptions): ReplayedRequest[] {
  return replayEngineWithEvents(trace, o).requests;
}

export function replayEngineWithEvents(trace: Trace, o: ReplayOptions): EngineReplay {
  const kvEvents = trace.replicas.map(() => ({ stored: 0, removed: 0 }));
  const clock = createVirtualClock();
  const out: ReplayedRequest[] = trace.requests.map(() => ({ cachedTokens: null, ttftMs: null }));
  const engines = trace.replicas.map((_, i) => {
    const cfg = resolveConfig(traceReplicaOptions(trace, { ...o, name: `replay-${i}` }), i);
    const tally = kvEvents[i];
    const pool = createBlockPool(cfg.kvBlocks, { stored: () => { tally.stored++; }, removed: () => { tally.removed++; }, cleared() {} }, cfg.blockSize, cfg.kvModel);
    const engine = createEngine(cfg, pool, { onAdmit() {}, onFirstToken() {}, onToken() {}, onFinish() {}, onPreempt() {} }, clock);
    return { cfg, engine };
  });
  trace.requests.forEach((r, k) => {
    if (r.replica < 0 || r.cachedTokens === null) return;
    const { cfg, engine } = engines[r.replica];
    clock.setTimeout(() => {
      const arrival = clock.now();
      serveRecorded(clock, cfg, engine, r, `r${k}`, { first: (cached) => { out[k] = { cachedTokens: cached, ttftMs: clock.now() - arrival }; }, done() {} });
    }, r.atMs);
  });
  clock.run(Number.POSITIVE_INFINITY);
  return { requests: out, kvEvents };
}
