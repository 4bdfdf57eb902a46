import { DEFAULT_IDENTITY_OPTIONS, identify } from '../../src/identify/identity.js';
import type { RequestIdentity } from '../../src/identify/identity.js';
import type { ReplicaView } from '../../src/routing/types.js';
import { createMemorySessionStore } from '../../src/store/memory.js';
import { mulberry32 } from '../../src/prng.js';

/** Deterministic randomness so statistical tests give the same answer every run. */
export const prng = mulberry32;

export interface MutableReplica {
  name: string;
  weight: number;
  up: boolean;
  draining: boolean;
  inflight: number;
  models: ReadonlySet<string> | null;
  waiting: number;
  running: number;
  kvUsage: number;
  kvCapacityTokens: number | null;
}

export function replica(name: string, over: Partial<ReplicaView> = {}): MutableReplica {
  return {
    name, weight: 1, up: true, draining: false, inflight: 0, models: null,
    waiting: 0, running: 0, kvUsage: 0, kvCapacityTokens: null, ...over,
  };
}

export function fleet(n: number, over: Partial<ReplicaView> = {}): MutableReplica[] {
  return Array.from({ length: n }, (_, i) => replica(`r${i}`, over));
}

export function store() {
  return createMemorySessionStore({ maxSessions: 1_000_000, ttlMs: 3_600_000 });
}

export const opts = DEFAULT_IDENTITY_OPTIONS;

/** A chat identity; `key` becomes an x-session-id header. */
export function chatIdentity(messages: unknown[], key: string | null = null, extra: Record<string, unknown> = {}): RequestIdentity {
  const headers = key === null ? {} : { 'x-session-id': key };
  return identify('chat', { model: 'm', messages, ...extra }, headers, opts);
}

/** A bare identity with no prefix chain (only a key): for load and placement tests. */
export function keyIdentity(key: string | null): RequestIdentity {
  return {
    kind: 'chat', model: 'm', sessionKey: key, sessionKeySource: key === null ? null : 'header:x-session-id',
    chain: [], seed: '', firstUser: -1, chainTokens: [], promptTokens: 0, placementKey: null, conversationKey: null, sharedTokens: 0, lastUser: -1, utterance: null,
    storedResponseId: null, storesResponse: false,
  };
}

const WORDS = 'account address agent answer appointment balance bank bill booking branch call card case change check city claim clinic code confirm contact cost customer date delivery desk detail doctor email field form guide help history holiday home hour invoice issue letter line list meeting message month name note number office order page parcel payment phone place plan policy price problem reason receipt record refund reply report request return route schedule service session signal slot station status street summary support ticket time today transfer travel turn update visit voice wait week window word year'.split(' ');

export function words(n: number, rand: () => number): string {
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push(WORDS[Math.floor(rand() * WORDS.length)]);
  return out.join(' ');
}

/** A voice conversation: fixed system prompt, then turns; messages(t) is the prompt of turn t (1-based). */
export function conversation(system: string, turns: number, rand: () => number) {
  const users = Array.from({ length: turns }, () => words(8 + Math.floor(rand() * 20), rand));
  const replies = Array.from({ length: turns }, () => words(15 + Math.floor(rand() * 40), rand));
  return {
    messages(turn: number): unknown[] {
      const msgs: unknown[] = [{ role: 'system', content: system }];
      for (let t = 0; t < turn; t++) {
        msgs.push({ role: 'user', content: users[t] });
        if (t < turn - 1) msgs.push({ role: 'assistant', content: replies[t] });
      }
      return msgs;
    },
  };
}
