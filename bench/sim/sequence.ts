// One request as the engine sees it, and the chained block hashes of its tokens.

import { blockHash, fnv1a } from './hash.js';
import type { OutputPlan } from './output.js';

export type FinishReason = 'stop' | 'length' | 'abort';
export type SeqStatus = 'frontend' | 'waiting' | 'running' | 'finished' | 'aborted';

export interface SeqSink {
  /** The engine sampled generated token number `index` (0-based) at the end of a step. */
  onToken(seq: Seq, index: number): void;
  onFinish(seq: Seq, reason: FinishReason): void;
}

export interface Seq {
  id: string;
  /** Prompt token ids followed by the generated ones. */
  tokens: number[];
  promptLen: number;
  /** Root of the hash chain: the request's cache_salt, or a constant. */
  root: number;
  /** Hashes of full blocks, filled lazily. */
  hashes: number[];
  plan: OutputPlan;
  /** Tokens to generate: the plan's length capped by max_tokens. */
  maxOut: number;
  generated: number;
  numComputed: number;
  blocks: number[];
  /** Blocks already registered in the prefix cache. */
  cachedBlocks: number;
  /** Tokens found in the prefix cache at first admission (usage.cached_tokens); -1 before. */
  cachedTokens: number;
  status: SeqStatus;
  httpArrivalMs: number;
  engineArrivalMs: number;
  firstTokenMs: number;
  preemptions: number;
  /** vLLM's request priority (lower runs first; 0 by default): read under --scheduling-policy priority. */
  priority: number;
  /** The LoRA adapter it runs with (lora.ts); null for the base model. */
  lora: string | null;
  sink: SeqSink;
}

export const NO_SALT_ROOT = 0x5eed;

export function saltRoot(salt: string | undefined): number {
  if (salt === undefined) return NO_SALT_ROOT;
  // Two lanes keep salts from colliding with each other or with the unsalted root.
  return (fnv1a(salt, 0x2545f491) & 0x1fffff) * 0x100000000 + fnv1a(salt);
}

export function createSeq(init: {
  id: string;
  prompt: number[];
  root: number;
  plan: OutputPlan;
  maxOut: number;
  httpArrivalMs: number;
  priority?: number;
  lora?: string | null;
  sink: SeqSink;
}): Seq {
  return {
    id: init.id,
    tokens: init.prompt,
    promptLen: init.prompt.length,
    root: init.root,
    hashes: [],
    plan: init.plan,
    maxOut: init.maxOut,
    generated: 0,
    numComputed: 0,
    blocks: [],
    cachedBlocks: 0,
    cachedTokens: -1,
    status: 'frontend',
    httpArrivalMs: init.httpArrivalMs,
    engineArrivalMs: 0,
    firstTokenMs: 0,
    preemptions: 0,
    priority: init.priority ?? 0,
    lora: init.lora ?? null,
    sink: init.sink,
  };
}

export function ensureHashes(seq: Seq, nBlocks: number, blockSize: number): void {
  for (let i = seq.hashes.length; i < nBlocks; i++) {
    const parent = i === 0 ? seq.root : seq.hashes[i - 1];
    seq.hashes.push(blockHash(parent, seq.tokens, i * blockSize, (i + 1) * blockSize));
  }
}
