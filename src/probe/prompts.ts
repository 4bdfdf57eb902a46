// Deterministic prompt generation for the probe cases.
//
// Sizes follow the field report: ~4 chars per token of English-like text. Filler is drawn from a
// fixed vocabulary with a seeded PRNG so two runs (and two machines) send the same bytes apart from
// the nonce, and so the text tokenizes like prose rather than like one repeated character (which
// some tokenizers collapse into very few tokens).

import { randomUUID } from 'node:crypto';
import { mulberry32 as prng } from '../prng.js';

export const CASE_IDS = ['tiny', 'fresh1k', 'cold5k', 'repeat9k'] as const;
export type CaseId = (typeof CASE_IDS)[number];

export interface CaseSpec {
  id: CaseId;
  /** Approximate prompt size in tokens at scale 1. */
  tokens: number;
  /** A unique nonce opens the prompt so no earlier request can share a cached prefix. */
  nonce: boolean;
  /** Sent twice per trial with identical bytes; the second send is the warm figure. */
  repeat: boolean;
  description: string;
}

export const CASES: Record<CaseId, CaseSpec> = {
  tiny: { id: 'tiny', tokens: 30, nonce: false, repeat: false, description: '~30-token prompt, same bytes every trial (warm floor)' },
  fresh1k: { id: 'fresh1k', tokens: 1000, nonce: true, repeat: false, description: 'fresh ~1K-token prompt, unique nonce first' },
  cold5k: { id: 'cold5k', tokens: 5500, nonce: true, repeat: false, description: 'cold ~5.5K-token prefill, unique nonce first' },
  repeat9k: { id: 'repeat9k', tokens: 9000, nonce: true, repeat: true, description: '~9K-token prompt sent twice with the same bytes (1st cold, 2nd warm)' },
};

export const CHARS_PER_TOKEN = 4;

export interface ChatMessage {
  role: 'system' | 'user';
  content: string;
}

const TINY_SYSTEM = 'You are a concise voice assistant. Answer in one short sentence.';
const LONG_SYSTEM_HEAD = 'You are a concise voice assistant. Use the reference notes below when they help.\n\n';
const USER_TEXT = 'Reply with the single word: ready.';

const WORDS = (
  'account address after agent answer appointment april area around arrival balance bank before bill ' +
  'booking branch brief call caller card careful case change check city claim clear clinic code ' +
  'confirm contact correct cost counter customer date day delivery desk detail digit doctor document ' +
  'early email evening exact february field final follow form friday friendly garden guide help ' +
  'history holiday home hour identity invoice issue june key kitchen late letter line list local ' +
  'march meeting message minute monday month morning name network night note number office order ' +
  'packet page parcel partner payment period person phone place plan please policy post price ' +
  'problem quiet quick reason receipt record refund region reply report request reservation return ' +
  'route saturday schedule second service session short signal simple slot speak station status ' +
  'street summary sunday support system table thursday ticket time today transfer travel tuesday ' +
  'turn update urgent user valid visit voice wait wednesday week window within word year yesterday'
).split(' ');


let fillerCache = '';

/** Deterministic English-like filler of at least `chars` characters, cut at a word boundary. */
export function filler(chars: number): string {
  if (chars <= 0) return '';
  if (fillerCache.length < chars + 64) {
    // Regenerate from the same seed so every prefix is stable no matter which size came first.
    const rand = prng(0x5eed);
    const parts: string[] = [];
    let len = 0;
    const want = Math.max(chars + 64, fillerCache.length * 2);
    while (len < want) {
      const n = 6 + Math.floor(rand() * 10);
      const words: string[] = [];
      for (let i = 0; i < n; i++) words.push(WORDS[Math.floor(rand() * WORDS.length)]);
      const sentence = words[0][0].toUpperCase() + words.join(' ').slice(1) + '. ';
      parts.push(sentence);
      len += sentence.length;
    }
    fillerCache = parts.join('');
  }
  const cut = fillerCache.lastIndexOf(' ', chars);
  return fillerCache.slice(0, cut > 0 ? cut : chars);
}

export function newNonce(): string {
  return randomUUID();
}

/** Messages for one send of a case. `scale` shrinks the large cases (tests); tiny is fixed. */
export function buildMessages(spec: CaseSpec, nonce: string | null, scale = 1): ChatMessage[] {
  if (spec.id === 'tiny') {
    return [
      { role: 'system', content: TINY_SYSTEM },
      { role: 'user', content: USER_TEXT },
    ];
  }
  const head = (nonce ? `[${nonce}] ` : '') + LONG_SYSTEM_HEAD;
  const targetChars = Math.max(64, Math.round(spec.tokens * scale * CHARS_PER_TOKEN));
  const room = targetChars - head.length - USER_TEXT.length;
  return [
    { role: 'system', content: head + filler(room) },
    { role: 'user', content: USER_TEXT },
  ];
}

export function approxTokens(spec: CaseSpec, scale = 1): number {
  return spec.id === 'tiny' ? spec.tokens : Math.round(spec.tokens * scale);
}
