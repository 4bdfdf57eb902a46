// Every knob of a simulated replica, with defaults calibrated to the field report's self-hosted
// figures (vLLM 0.25.1, gemma-4-31B-it FP8 on one H100). README.md derives each number.

import type { Fault } from './faults.js';
import type { KvModel } from './kv-cache.js';
import type { KvEventsOptions } from './kv-events.js';
import type { LoraKnobs } from './lora.js';

export interface TimingKnobs {
  /** API-server cost paid by every request before it reaches the engine queue (HTTP, template, IPC). */
  frontendMs: number;
  /** Prompt-proportional frontend cost (tokenisation, block hashing); fitted on the 9K cache-hit figure. */
  tokenizeMsPerToken: number;
  /** Fixed cost of one engine step (weight streaming; memory-bound floor). */
  stepBaseMs: number;
  /** Linear prefill cost per uncached token computed in a step. */
  prefillMsPerToken: number;
  /** Attention cost of a prefill chunk: coefficient × newTokens × (contextBefore + newTokens). */
  attnMsPerTokenPair: number;
  /** Cost added to a step by each sequence that decodes one token in it. */
  decodeMsPerSeq: number;
  /** Cost added to a step per context token of each decoding sequence (KV reads). */
  decodeMsPerCtxToken: number;
  /**
   * A step's linear prefill cost overlaps its fixed floor instead of adding to it: max(stepBaseMs,
   * tokens × prefillMsPerToken), as a GPU step stays memory-bound until its tokens fill the compute.
   * Off (the calibrated model) by default; on, small prefill chunks ride in a step nearly free, a
   * lenient bound on what chunked prefill costs.
   */
  roofline?: boolean;
}

export interface CapacityKnobs {
  /** vLLM --max-model-len. */
  maxModelLen: number;
  /** KV cache block size in tokens (vLLM default 16). */
  blockSize: number;
  /** num_gpu_blocks: KV capacity of the replica in blocks. */
  kvBlocks: number;
  /** vLLM --max-num-seqs. */
  maxNumSeqs: number;
  /** vLLM --max-num-batched-tokens: per-step token budget for chunked prefill. */
  maxNumBatchedTokens: number;
  /** vLLM --long-prefill-token-threshold: at most this many prompt tokens of one request per step; 0 = none (vLLM's default). */
  longPrefillTokenThreshold: number;
  /** Waiting-queue bound; beyond it requests get a 503 (not a vLLM flag; a sim knob). */
  maxWaiting: number;
  /**
   * vLLM's async scheduling (on by default in V1 where the executor supports it): the next step is
   * scheduled while the current one runs, so a request that arrives during a step waits for it and
   * for the step after. Off by default here: the calibration's figures were fitted without it.
   */
  asyncScheduling: boolean;
  /**
   * `vllm` (the default): the block pool and admission as vLLM 0.32's, checked against recorded
   * runs (bench/calibrate): a null block, partial blocks reused before cached ones are evicted,
   * and a waiting request admitted only when blocks for its whole prompt are free
   * (`scheduler_reserve_full_isl`, on by default). `naive`: the model before that check.
   */
  kvModel: KvModel;
}

export interface OutputKnobs {
  /** Natural answer length (tokens, including the end-of-turn token), uniform in [min, max]. */
  outputTokens: { min: number; max: number };
  /** vLLM --enable-prompt-tokens-details: usage.prompt_tokens_details.cached_tokens is reported. */
  enablePromptTokensDetails: boolean;
  /** vLLM --enable-prefix-caching. */
  enablePrefixCaching: boolean;
  /**
   * VLLM_ENABLE_RESPONSES_API_STORE=1: /v1/responses keeps responses (store: true, the default) in
   * the replica's memory for previous_response_id and GET /v1/responses/{id}. Off: store is ignored.
   */
  enableResponsesStore: boolean;
  /** vLLM --scheduling-policy: fcfs (a request priority other than 0 is refused) or priority. */
  schedulingPolicy: 'fcfs' | 'priority';
  /** vLLM --kv-cache-dtype (reported in vllm:cache_config_info; the sim's timing ignores it). */
  cacheDtype: string;
  /** The weights behind the served name (`root` in /v1/models); the served name by default. */
  root: string;
}

export interface SimReplicaOptions extends Partial<TimingKnobs>, Partial<CapacityKnobs>, Partial<OutputKnobs>, Partial<LoraKnobs> {
  name?: string;
  /** 0 or omitted = a free port. */
  port?: number;
  host?: string;
  model?: string;
  /** Seeds output lengths and texts; identical seed + prompt gives an identical answer. */
  seed?: number;
  /** Faults active from the start. */
  faults?: Fault[];
  /** Publish vLLM's KV events from the block pool (zeromq PUB + replay ROUTER); true = free ports. */
  kvEvents?: boolean | KvEventsOptions;
  /** vLLM's --otlp-traces-endpoint: an `llm_request` span per finished request, OTLP http/json to this URL (tracing.ts). */
  otlpTracesEndpoint?: string;
}

export type SimConfig = TimingKnobs &
  CapacityKnobs &
  OutputKnobs &
  LoraKnobs & { name: string; port: number; host: string; model: string; seed: number };

/** Exact fit of the four single-request figures plus the 50-session load; see README "Calibration". */
export const H100_TIMING: Readonly<TimingKnobs> = Object.freeze({
  frontendMs: 5.6,
  tokenizeMsPerToken: 0.00432,
  stepBaseMs: 20,
  prefillMsPerToken: 0.0882,
  attnMsPerTokenPair: 1.086e-5,
  decodeMsPerSeq: 0.6,
  decodeMsPerCtxToken: 0.00005,
});

export const H100_CAPACITY: Readonly<CapacityKnobs> = Object.freeze({
  maxModelLen: 32768,
  blockSize: 16,
  kvBlocks: 24576,
  maxNumSeqs: 64,
  maxNumBatchedTokens: 8192,
  longPrefillTokenThreshold: 0,
  maxWaiting: Number.POSITIVE_INFINITY,
  asyncScheduling: false,
  kvModel: 'vllm',
});

/** A replica whose KV cache holds only 128 blocks (2,048 tokens): for eviction and preemption tests. */
export const TINY_KV: Readonly<Partial<CapacityKnobs>> = Object.freeze({ kvBlocks: 128, maxModelLen: 2048 });

export const DEFAULT_MODEL = 'google/gemma-4-31B-it';

export function resolveConfig(opts: SimReplicaOptions = {}, index = 0): SimConfig {
  const pick = <T>(v: T | undefined, d: T): T => (v === undefined ? d : v);
  const blockSize = pick(opts.blockSize, H100_CAPACITY.blockSize);
  const kvBlocks = pick(opts.kvBlocks, H100_CAPACITY.kvBlocks);
  // vLLM refuses to start when one max-length sequence cannot fit in the KV cache; the sim
  // shrinks the default instead so a small-cache replica still starts.
  const maxModelLen = pick(opts.maxModelLen, Math.min(H100_CAPACITY.maxModelLen, kvBlocks * blockSize));
  if (maxModelLen > kvBlocks * blockSize) {
    throw new Error(`maxModelLen ${maxModelLen} does not fit in ${kvBlocks} blocks of ${blockSize} tokens`);
  }
  const out = pick(opts.outputTokens, { min: 20, max: 60 });
  if (!(out.min >= 1 && out.max >= out.min)) throw new Error('outputTokens needs 1 <= min <= max');
  return {
    name: pick(opts.name, `sim-${index}`),
    port: pick(opts.port, 0),
    host: pick(opts.host, '127.0.0.1'),
    model: pick(opts.model, DEFAULT_MODEL),
    seed: pick(opts.seed, 0),
    frontendMs: pick(opts.frontendMs, H100_TIMING.frontendMs),
    tokenizeMsPerToken: pick(opts.tokenizeMsPerToken, H100_TIMING.tokenizeMsPerToken),
    stepBaseMs: pick(opts.stepBaseMs, H100_TIMING.stepBaseMs),
    prefillMsPerToken: pick(opts.prefillMsPerToken, H100_TIMING.prefillMsPerToken),
    attnMsPerTokenPair: pick(opts.attnMsPerTokenPair, H100_TIMING.attnMsPerTokenPair),
    decodeMsPerSeq: pick(opts.decodeMsPerSeq, H100_TIMING.decodeMsPerSeq),
    decodeMsPerCtxToken: pick(opts.decodeMsPerCtxToken, H100_TIMING.decodeMsPerCtxToken),
    roofline: opts.roofline === true,
    maxModelLen,
    blockSize,
    kvBlocks,
    maxNumSeqs: pick(opts.maxNumSeqs, H100_CAPACITY.maxNumSeqs),
    maxNumBatchedTokens: pick(opts.maxNumBatchedTokens, H100_CAPACITY.maxNumBatchedTokens),
    longPrefillTokenThreshold: pick(opts.longPrefillTokenThreshold, H100_CAPACITY.longPrefillTokenThreshold),
    maxWaiting: pick(opts.maxWaiting, H100_CAPACITY.maxWaiting),
    asyncScheduling: pick(opts.asyncScheduling, H100_CAPACITY.asyncScheduling),
    kvModel: pick(opts.kvModel, H100_CAPACITY.kvModel),
    outputTokens: { min: out.min, max: out.max },
    enablePromptTokensDetails: pick(opts.enablePromptTokensDetails, true),
    enablePrefixCaching: pick(opts.enablePrefixCaching, true),
    enableResponsesStore: pick(opts.enableResponsesStore, true),
    schedulingPolicy: pick(opts.schedulingPolicy, 'fcfs'),
    cacheDtype: pick(opts.cacheDtype, 'auto'),
    root: pick(opts.root, pick(opts.model, DEFAULT_MODEL)),
    maxLoras: pick(opts.maxLoras, 0),
    // vLLM's default --max-cpu-loras is --max-loras.
    maxCpuLoras: pick(opts.maxCpuLoras, pick(opts.maxLoras, 0)),
    loraModules: { ...(opts.loraModules ?? {}) },
    loraLoadMs: pick(opts.loraLoadMs, 50),
    runtimeLoraUpdating: pick(opts.runtimeLoraUpdating, false),
    checkLoraPaths: pick(opts.checkLoraPaths, false),
  };
}
