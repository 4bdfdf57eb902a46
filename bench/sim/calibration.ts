// The field report's probes, reproduced against any OpenAI-compatible URL (a sim replica here):
// stream=true, TTFT = send → first content chunk, one warm keep-alive connection, medians.

import type { Agent } from 'node:http';
import { randomHex } from './hash.js';
import { median, messagesOfTokens, streamChat } from './probe.js';

/** Self-hosted H100 medians from shared/seeds/000 (ms). */
export const TARGETS = Object.freeze({
  tiny: 28,
  fresh1k: 130,
  cold5k: 864,
  repeat9k: 67,
  voiceP50: 73,
  voiceP95: 113,
});

export const PROBE_TOKENS = Object.freeze({ tiny: 30, fresh1k: 1000, cold5k: 5500, repeat9k: 9000 });

async function ttft(url: string, agent: Agent, tokens: number, nonce: string): Promise<number> {
  const r = await streamChat(url, { messages: messagesOfTokens(tokens, nonce), max_tokens: 2 }, agent);
  if (r.status !== 200 || r.ttftMs === null) throw new Error(`probe failed: HTTP ${r.status} ${r.raw.slice(0, 200)}`);
  return r.ttftMs;
}

const nonce = () => `[${randomHex(12)}] `;

/** Tiny prompt, warm: the same bytes sent once to warm up, then measured. */
export async function measureTiny(url: string, agent: Agent, trials = 7): Promise<number> {
  const n = nonce();
  await ttft(url, agent, PROBE_TOKENS.tiny, n);
  const xs: number[] = [];
  for (let i = 0; i < trials; i++) xs.push(await ttft(url, agent, PROBE_TOKENS.tiny, n));
  return median(xs);
}

/** A prompt that is new every time (unique nonce first): a cold prefill. */
export async function measureFresh(url: string, agent: Agent, tokens: number, trials: number): Promise<number> {
  const xs: number[] = [];
  for (let i = 0; i < trials; i++) xs.push(await ttft(url, agent, tokens, nonce()));
  return median(xs);
}

/** The same long prompt sent again: the second and later sends hit the prefix cache. */
export async function measureRepeat(url: string, agent: Agent, tokens: number, trials = 5): Promise<number> {
  const n = nonce();
  await ttft(url, agent, tokens, n);
  const xs: number[] = [];
  for (let i = 0; i < trials; i++) xs.push(await ttft(url, agent, tokens, n));
  return median(xs);
}

export function within(measured: number, target: number, tolerance = 0.2): boolean {
  return Math.abs(measured - target) <= tolerance * target;
}

/**
 * Measure until within tolerance or out of attempts: a loaded 2-core machine can add timer lag
 * to one batch of trials, and another batch tells lag from a model that is off.
 */
export async function settle(measure: () => Promise<number>, target: number, attempts = 3): Promise<number[]> {
  const seen: number[] = [];
  for (let i = 0; i < attempts; i++) {
    const v = await measure();
    seen.push(v);
    if (within(v, target)) break;
  }
  return seen;
}
