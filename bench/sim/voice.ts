// The field report's "50 concurrent voice sessions on one H100": each session is a byte-stable
// system prompt plus tools, then turns of a short user utterance, a streamed answer appended to
// the history verbatim, and think time (the user speaking) before the next turn. Caches are warm:
// the system prompt is sent once before the sessions start, as the report's deploy warmup did.

import type { Agent } from 'node:http';
import { createRng } from './hash.js';
import { keepAliveAgent, streamChat } from './probe.js';
import type { ChatMessage } from './tokenizer.js';

export interface VoiceOptions {
  url: string;
  sessions: number;
  /** Turns per session. */
  turns: number;
  /**
   * Leading turns left out of `ttfts`: a session's first turn lands in the burst of sessions
   * joining, while the report's figures describe sessions in full swing.
   */
  skipTurns: number;
  /** System prompt length in tokens (approximate: 4 chars each). */
  systemTokens: number;
  /** User utterance length in tokens, uniform. */
  userTokens: [number, number];
  /** Pause between an answer's end and the next user turn, uniform. */
  thinkMs: [number, number];
  /** Sessions start uniformly spread over this window. */
  startSpreadMs: number;
  seed: number;
  agent?: Agent;
}

export const VOICE_DEFAULTS: Omit<VoiceOptions, 'url'> = Object.freeze({
  sessions: 50,
  turns: 6,
  skipTurns: 1,
  systemTokens: 1500,
  userTokens: [8, 32] as [number, number],
  thinkMs: [1000, 3000] as [number, number],
  startSpreadMs: 500,
  seed: 1,
});

export interface VoiceResult {
  /** TTFTs of the turns after `skipTurns`. */
  ttfts: number[];
  /** TTFTs by turn index. */
  byTurn: number[][];
  errors: number;
  /** Mean cached_tokens / prompt_tokens over all turns. */
  cachedShare: number;
  durationMs: number;
}

const WORDS = ['yes', 'no', 'maybe', 'seven', 'thirty', 'Tuesday', 'please', 'change', 'booking', 'name', 'is',
  'Maria', 'two', 'people', 'window', 'seat', 'actually', 'make', 'it', 'eight', 'thanks', 'the', 'order'];

const fn = (name: string, description: string, properties: Record<string, { type: string }>) => ({
  type: 'function',
  function: { name, description, parameters: { type: 'object', properties } },
});
const TOOLS = [
  fn('book_table', 'Book a table', { people: { type: 'integer' }, time: { type: 'string' } }),
  fn('cancel_booking', 'Cancel a booking', { booking_id: { type: 'string' } }),
  fn('confirm', 'Confirm the details', {}),
];

function systemPrompt(tokens: number): string {
  const base = 'You are a friendly restaurant booking agent on the phone. Keep answers short and spoken. ';
  let s = '';
  while (s.length < tokens * 4) s += base;
  return s.slice(0, tokens * 4);
}

function utterance(rnd: () => number, tokens: number): string {
  let s = '';
  while (s.length < tokens * 4) s += `${WORDS[Math.floor(rnd() * WORDS.length)]} `;
  return s.slice(0, tokens * 4);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function runVoice(opts: VoiceOptions): Promise<VoiceResult> {
  const agent = opts.agent ?? keepAliveAgent();
  const system: ChatMessage = { role: 'system', content: systemPrompt(opts.systemTokens) };
  const t0 = performance.now();
  // Deploy-time warmup: the shared prefix is in the cache before the first caller.
  await streamChat(opts.url, { messages: [system, { role: 'user', content: 'hi' }], tools: TOOLS, max_tokens: 1 }, agent);
  const ttfts: number[] = [];
  const byTurn: number[][] = Array.from({ length: opts.turns }, () => []);
  const shares: number[] = [];
  let errors = 0;
  const session = async (i: number) => {
    const rnd = createRng(opts.seed * 1000 + i);
    const span = (r: [number, number]) => r[0] + rnd() * (r[1] - r[0]);
    await sleep(rnd() * opts.startSpreadMs);
    const history: ChatMessage[] = [system];
    for (let turn = 0; turn < opts.turns; turn++) {
      history.push({ role: 'user', content: utterance(rnd, Math.round(span(opts.userTokens))) });
      const r = await streamChat(opts.url, { messages: history, tools: TOOLS }, agent).catch(() => null);
      if (!r || r.status !== 200 || r.ttftMs === null || !r.done) {
        errors++;
        history.pop();
      } else {
        if (turn >= opts.skipTurns) ttfts.push(r.ttftMs);
        byTurn[turn].push(r.ttftMs);
        if (r.usage) shares.push((r.usage.prompt_tokens_details?.cached_tokens ?? 0) / r.usage.prompt_tokens);
        history.push({ role: 'assistant', content: r.content });
      }
      if (turn < opts.turns - 1) await sleep(span(opts.thinkMs));
    }
  };
  await Promise.all(Array.from({ length: opts.sessions }, (_, i) => session(i)));
  if (!opts.agent) agent.destroy();
  const cachedShare = shares.length ? shares.reduce((a, b) => a + b, 0) / shares.length : 0;
  return { ttfts, byTurn, errors, cachedShare, durationMs: performance.now() - t0 };
}
