// The latency model, as pure functions of what a step computes. README.md derives the numbers.

import type { TimingKnobs } from './config.js';

export interface StepItem {
  /** Tokens computed for this sequence in the step. */
  n: number;
  /** Tokens already in its KV cache before the step (cached prefix + earlier chunks). */
  ctx: number;
  decode: boolean;
}

/** Frontend latency before a request reaches the engine queue. */
export function frontendMs(k: TimingKnobs, promptTokens: number): number {
  return k.frontendMs + k.tokenizeMsPerToken * promptTokens;
}

/** Wall time of one engine step: a memory-bound floor plus decode and prefill work. */
export function stepMs(k: TimingKnobs, items: readonly StepItem[]): number {
  let linear = 0;
  let ms = 0;
  for (const it of items) {
    if (it.decode) ms += k.decodeMsPerSeq + k.decodeMsPerCtxToken * it.ctx;
    else {
      linear += k.prefillMsPerToken * it.n;
      ms += k.attnMsPerTokenPair * it.n * (it.ctx + it.n);
    }
  }
  return ms + (k.roofline === true ? Math.max(k.stepBaseMs, linear) : k.stepBaseMs + linear);
}

/** Single-request TTFT predicted by the model (no queueing, prompt fits one step). */
export function predictTtftMs(k: TimingKnobs, promptTokens: number, cachedTokens: number): number {
  const u = promptTokens - cachedTokens;
  return frontendMs(k, promptTokens) + stepMs(k, [{ n: u, ctx: cachedTokens, decode: false }]);
}
