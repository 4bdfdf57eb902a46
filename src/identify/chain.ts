import { kernelChain, kernelMemory } from './block-hash.js';
import { digest, resetWriter, writeByte, writeField, writeValue, writtenTextBytes } from './canonical.js';

/** How a prompt is cut into links and how its tokens are estimated. */
export interface ChainOptions {
  /** UTF-8 bytes per token for estimates (~4 for English prose, where bytes = chars). */
  readonly bytesPerToken: number;
  /** Completion prompts (strings): bytes per link (64 ≈ 16 tokens, one vLLM block). */
  readonly blockBytes: number;
  /** Completion prompts (token-id arrays): ids per link (vLLM's block size). */
  readonly blockTokens: number;
  /** Completion prompts: the placement key is the link ending this many blocks in (or the last). */
  readonly placementBlocks: number;
}

export interface Chain {
  /** The seed link (model, cache_salt, and for chat what the template renders before the messages). */
  readonly seed: string;
  /** Index of the first user message (chat), -1 when none; 0 for completion prompts. */
  readonly firstUser: number;
  readonly chain: string[];
  readonly chainTokens: number[];
  readonly promptTokens: number;
  readonly placementKey: string | null;
  readonly conversationKey: string | null;
  readonly sharedTokens: number;
  /** Index of the last user message (chat, Responses API items), -1 when none. */
  readonly lastUser: number;
  /**
   * Hash of the last user message alone (its rendering, not the chain before it): what every call
   * of one caller turn shares, whatever system prompt each call puts before it. null when none.
   */
  readonly utterance: string | null;
}

/**
 * Chat templates wrap each message in role markers (`<|im_start|>user\n` … `<|im_end|>\n` and the
 * like): a few tokens per message that no string in the body accounts for.
 */
export const MESSAGE_OVERHEAD_TOKENS = 4;

const KIND_CHAT = 0x43; // C
const KIND_TEXT = 0x54; // T
const KIND_IDS = 0x49; // I
const KIND_RESPONSES = 0x52; // R

/** A request with nothing to chain (no messages, no prompt, or routed by something else). */
export const NO_CHAIN: Chain = { seed: '', firstUser: -1, chain: [], chainTokens: [], promptTokens: 0, placementKey: null, conversationKey: null, sharedTokens: 0, lastUser: -1, utterance: null };

/** Model and cache_salt: they change the seed but are not prompt text, so they add no tokens. */
export function writeSeedHead(kind: number, body: Record<string, unknown>): number {
  resetWriter();
  writeByte(kind);
  writeField(1, body.model);
  writeField(2, body.cache_salt);
  return writtenTextBytes();
}

/**
 * The links of a conversation: the seed (everything written since writeSeedHead, hashed), then one
 * link per item, each the hash of what `writeItem` renders of it chained on the link before, so
 * turn n's chain starts with turn n−1's whole chain. `writeItem` says whether the item is a user
 * turn. The placement key is the link of the first user turn: system prompt + first user turn,
 * stable for the whole conversation. It is shared by every caller who opens with the same words;
 * the conversation key tells them apart from their second user turn on (the link that ends it:
 * the first answer and the caller's next words), and is the placement key before that, when the
 * two conversations are the same bytes.
 */
export function linkChain(items: readonly unknown[], headBytes: number, opts: ChainOptions, writeItem: (item: unknown) => boolean): Chain {
  const bpt = opts.bytesPerToken;
  const seedTokens = Math.ceil((writtenTextBytes() - headBytes) / bpt);
  const seed = digest(0n);
  let prev = seed;
  const n = items.length;
  const chain = new Array<string>(n);
  const chainTokens = new Array<number>(n);
  let tokens = seedTokens;
  let firstUser = -1;
  let secondUser = -1;
  let lastUser = -1;
  for (let i = 0; i < n; i++) {
    resetWriter();
    if (writeItem(items[i])) {
      if (firstUser < 0) firstUser = i;
      else if (secondUser < 0) secondUser = i;
      lastUser = i;
    }
    prev = digest(prev);
    chain[i] = prev.toString(16);
    tokens += Math.ceil(writtenTextBytes() / bpt) + MESSAGE_OVERHEAD_TOKENS;
    chainTokens[i] = tokens;
  }
  const placementAt = firstUser < 0 ? n - 1 : firstUser;
  const sharedTokens = firstUser < 0 ? tokens : firstUser === 0 ? seedTokens : chainTokens[firstUser - 1];
  // The last user message rendered once more, alone: one message, not a second walk of the body.
  let utterance: string | null = null;
  if (lastUser >= 0) {
    resetWriter();
    writeItem(items[lastUser]);
    utterance = digest(0n).toString(16);
  }
  resetWriter();
  return { seed: seed.toString(16), firstUser, chain, chainTokens, promptTokens: tokens, placementKey: chain[placementAt], conversationKey: chain[secondUser < 0 ? placementAt : secondUser], sharedTokens, lastUser, utterance };
}

export const asRecord = (v: unknown): Record<string, unknown> | null => (v !== null && typeof v === 'object' && !Array.isArray(v) ? v as Record<string, unknown> : null);

/**
 * One link per message, over the canonical rendering of (role, name, content, tool_calls,
 * tool_call_id); the seed is model, cache_salt and what the template renders before the messages
 * (tools, documents, response_format, chat_template and its kwargs).
 */
export function chatChain(body: Record<string, unknown>, opts: ChainOptions): Chain {
  const messages = body.messages;
  if (!Array.isArray(messages) || messages.length === 0) return NO_CHAIN;
  const headBytes = writeSeedHead(KIND_CHAT, body);
  writeField(3, body.chat_template);
  writeField(4, body.chat_template_kwargs);
  writeField(5, body.tools);
  writeField(6, body.documents);
  writeField(7, body.response_format);
  return linkChain(messages, headBytes, opts, (m) => {
    const msg = asRecord(m);
    if (msg === null) {
      writeValue(m);
      return false;
    }
    writeField(1, msg.role);
    writeField(2, msg.name);
    writeField(3, msg.content);
    writeField(4, msg.tool_calls);
    writeField(5, msg.tool_call_id);
    return msg.role === 'user';
  });
}

/**
 * One link per Responses API input item, chained like chat messages; the seed is model,
 * cache_salt and what vLLM renders before the conversation (instructions as its system message,
 * tools, the text format). A string input is one user message, written exactly as the item
 * `{role: "user", content}` is, so a keyless conversation that starts with a string and resends
 * its history as items (`store: false`) extends its own chain turn after turn. `type: "message"`
 * is the same as no type; item ids and statuses are not rendered by vLLM and not hashed.
 */
export function responsesChain(body: Record<string, unknown>, opts: ChainOptions): Chain {
  const input = body.input;
  const items: readonly unknown[] | null = typeof input === 'string' ? [input] : Array.isArray(input) ? input : null;
  if (items === null || items.length === 0) return NO_CHAIN;
  const headBytes = writeSeedHead(KIND_RESPONSES, body);
  writeField(3, body.instructions);
  writeField(5, body.tools);
  writeField(7, body.text);
  return linkChain(items, headBytes, opts, (item) => {
    if (typeof item === 'string') {
      writeField(1, 'user');
      writeField(3, item);
      return true;
    }
    const it = asRecord(item);
    if (it === null) {
      writeValue(item);
      return false;
    }
    writeField(1, it.role);
    writeField(3, it.content);
    writeField(6, it.type === 'message' ? undefined : it.type);
    writeField(7, it.call_id);
    writeField(8, it.name);
    writeField(9, it.arguments);
    writeField(10, it.output);
    return it.role === 'user';
  });
}

const encoder = new TextEncoder();

/**
 * Fixed-size blocks, like vLLM's own block hashes: a string prompt is cut every `blockBytes` bytes
 * of UTF-8, a token-id prompt every `blockTokens` ids (as uint32). The prompt is written straight
 * into the block-hash kernel's memory and the whole chain is hashed in one call (block-hash.ts).
 * A batch (array of prompts) is routed by its first prompt.
 */
export function completionChain(body: Record<string, unknown>, opts: ChainOptions): Chain {
  let prompt = body.prompt;
  if (Array.isArray(prompt) && prompt.length > 0 && (typeof prompt[0] === 'string' || Array.isArray(prompt[0]))) {
    prompt = prompt[0];
  }
  let byteLength: number;
  let block: number;
  let perToken: number;
  let seed: bigint;
  if (typeof prompt === 'string') {
    writeSeedHead(KIND_TEXT, body);
    seed = digest(0n);
    block = Math.max(1, Math.floor(opts.blockBytes));
    const mem = kernelMemory(prompt.length * 3);
    byteLength = encoder.encodeInto(prompt, mem).written;
    perToken = opts.bytesPerToken;
  } else if (Array.isArray(prompt)) {
    writeSeedHead(KIND_IDS, body);
    seed = digest(0n);
    block = Math.max(1, Math.floor(opts.blockTokens)) * 4;
    const words = new Uint32Array(kernelMemory(prompt.length * 4).buffer, 0, prompt.length);
    for (let i = 0; i < prompt.length; i++) {
      const id = prompt[i];
      words[i] = typeof id === 'number' ? id : 0xffffffff;
    }
    byteLength = prompt.length * 4;
    perToken = 4;
  } else {
    return NO_CHAIN;
  }
  resetWriter();
  if (byteLength === 0) return NO_CHAIN;
  const chain = kernelChain(byteLength, block, seed);
  const n = chain.length;
  const chainTokens = new Array<number>(n);
  for (let i = 0; i < n; i++) chainTokens[i] = Math.ceil(Math.min((i + 1) * block, byteLength) / perToken);
  const placementAt = Math.min(n, Math.max(1, opts.placementBlocks)) - 1;
  return { seed: seed.toString(16), firstUser: 0, chain, chainTokens, promptTokens: chainTokens[n - 1], placementKey: chain[placementAt], conversationKey: chain[placementAt], sharedTokens: 0, lastUser: -1, utterance: null };
}
