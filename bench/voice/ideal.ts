// The IDEAL prefix-cache hit rate of a run: what the simulator's vLLM counters would read if
// every session had a replica of its own with unbounded KV (nothing evicted), on which its
// group's system prompt and tools were already warm once any earlier request of the run had
// computed them. Computed by replaying the run's exact token streams, in the order they were sent,
// through a model of the simulator's prefix cache (bench/sim/engine.ts, kv-cache.ts):
//
// - tokens: the simulator's own template and tokenizer (renderChat);
// - 16-token blocks, chained hashes; only full blocks are cached;
// - a request hits the longest run of cached blocks from its start, capped at (prompt − 1)
//   rounded down to a block (vLLM always computes the last prompt token);
// - a request leaves behind the full blocks of prompt + generated tokens but the last one
//   (the final sampled token is never fed back through the model).
//
// One cache holding every block any earlier request computed is the same thing for this
// workload (sessions share nothing beyond their group's prefix, which the definition counts as
// warm), and it is an upper bound for every placement of the same stream: no router can hit a
// block no earlier request computed.

import { blockHash } from '../sim/hash.js';
import { pushText, renderChat, SPECIAL, type ChatMessage as SimMessage } from '../sim/tokenizer.js';
import type { ToolCall } from './client.js';
import type { ChatMessage, } from './conversation.js';

export const BLOCK_SIZE = 16;
const ROOT = 0x5eed;

export interface SentRequest {
  sentAt: number;
  messages: readonly ChatMessage[];
  tools: readonly unknown[];
  /** What the replica generated: its text, or the tool call it streamed. */
  content: string;
  toolCall: ToolCall | null;
  finishReason: string | null;
}

export interface PrefixCacheModel {
  /** Cached tokens a request with this prompt would get. */
  hit(prompt: readonly number[]): number;
  /** Register the full blocks of the first `count` tokens. */
  add(tokens: readonly number[], count: number): void;
}

function chain(tokens: readonly number[], blocks: number, bs: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < blocks; i++) out.push(blockHash(i === 0 ? ROOT : out[i - 1], tokens, i * bs, (i + 1) * bs));
  return out;
}

export function createPrefixCacheModel(bs = BLOCK_SIZE): PrefixCacheModel {
  const seen = new Set<number>();
  return {
    hit(prompt) {
      const hashes = chain(prompt, Math.floor((prompt.length - 1) / bs), bs);
      let n = 0;
      while (n < hashes.length && seen.has(hashes[n])) n++;
      return n * bs;
    },
    add(tokens, count) {
      for (const h of chain(tokens, Math.floor(Math.min(count, tokens.length) / bs), bs)) seen.add(h);
    },
  };
}

/**
 * The token ids the simulator generated for an answer, rebuilt from what it streamed: text pieces
 * are one token each (bench/sim/output.ts), tool calls are the gemma4 layout `<tool_call>` +
 * `call:name{` + the arguments less the two characters the parser holds back + `</tool_call>`.
 * A natural end adds the end-of-turn token.
 */
export function generatedIds(content: string, call: ToolCall | null, finishReason: string | null): number[] {
  const ids: number[] = [];
  if (call) {
    ids.push(SPECIAL.toolCallStart);
    pushText(ids, `call:${call.name}{`);
    pushText(ids, call.arguments.slice(0, Math.max(0, call.arguments.length - 2)));
    ids.push(SPECIAL.toolCallEnd);
  } else {
    pushText(ids, content);
  }
  if (finishReason === 'stop' || finishReason === 'tool_calls') ids.push(SPECIAL.endOfTurn);
  return ids;
}

export function promptIds(messages: readonly ChatMessage[], tools: readonly unknown[]): number[] {
  return renderChat(messages as SimMessage[], tools.length > 0 ? [...tools] : null);
}

export interface IdealResult {
  /** Ideal cached tokens per request, in the order given. */
  cached: number[];
  prompt: number[];
  hitRate: number;
}

/**
 * Replays `requests` in send order through one never-evicting cache, after `warm` (requests sent
 * before the run, e.g. the deploy-time warmup: they fill the cache and are not counted).
 */
export function idealHits(requests: readonly SentRequest[], warm: readonly SentRequest[] = []): IdealResult {
  const model = createPrefixCacheModel();
  for (const r of warm) {
    const all = promptIds(r.messages, r.tools).concat(generatedIds(r.content, r.toolCall, r.finishReason));
    model.add(all, all.length - 1);
  }
  const order = requests.map((_, i) => i).sort((a, b) => requests[a].sentAt - requests[b].sentAt);
  const cached = new Array<number>(requests.length).fill(0);
  const prompt = new Array<number>(requests.length).fill(0);
  for (const i of order) {
    const r = requests[i];
    const p = promptIds(r.messages, r.tools);
    prompt[i] = p.length;
    cached[i] = model.hit(p);
    const gen = generatedIds(r.content, r.toolCall, r.finishReason);
    const all = p.concat(gen);
    model.add(all, all.length - 1);
  }
  const q = prompt.reduce((a, b) => a + b, 0);
  return { cached, prompt, hitRate: q > 0 ? cached.reduce((a, b) => a + b, 0) / q : 0 };
}
