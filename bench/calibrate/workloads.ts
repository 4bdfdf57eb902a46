// The workloads a calibration run records, in the served model's own token ids (turned into text
// by the replica's /detokenize, as inference-perf makes its prompts), so that prompt lengths are
// exact on the real tokenizer:
// - shared prefix: G system prompts × U users, each user's prompt the group's system prompt and a
//   question of its own, sent to /v1/completions keyless at a constant rate, cycling through the
//   prompts in one shuffled order (inference-perf's `shared_prefix` data and `constant` load);
// - sessions: A agents (system prompts) × S sessions each, T turns a session, chat completions
//   keyed by x-session-id, each turn sent after the previous answer and a think time, the history
//   growing with the answers the replica gave.

import { mulberry32 } from '../../src/prng.js';
import type { Trace } from './trace.js';

export interface SharedPrefixWorkload {
  kind: 'shared-prefix';
  groups: number;
  usersPerGroup: number;
  systemTokens: number;
  questionTokens: number;
  outputTokens: number;
  ratePerS: number;
  durationS: number;
  seed: number;
  /**
   * Zipf exponent of the groups' popularity: each request draws its group with weight 1/(g+1)^s
   * and its user uniformly. Absent: inference-perf's uniform cycle through the prompts.
   */
  zipf?: number;
}

export interface SessionsWorkload {
  kind: 'sessions';
  agents: number;
  sessionsPerAgent: number;
  turns: number;
  systemTokens: number;
  userTokens: number;
  outputTokens: number;
  thinkMs: [number, number];
  startSpreadMs: number;
  seed: number;
}

export type Workload = SharedPrefixWorkload | SessionsWorkload;

/**
 * The recorded workloads. Capacities are the real fleet's: 2 replicas of 48 blocks × 128 tokens
 * (47 usable: vLLM keeps one as its null block), 12,032 tokens of cache in all.
 */
export const WORKLOADS: Record<string, Workload> = {
  // 6 × 1,400 tokens of prefix: more than one replica holds, less than the fleet does.
  shared: { kind: 'shared-prefix', groups: 6, usersPerGroup: 8, systemTokens: 1400, questionTokens: 100, outputTokens: 16, ratePerS: 2, durationS: 60, seed: 1 },
  // 12 × 1,400 = 16.8K tokens of prefix against 12K of cache: some groups must be cold.
  'shared-pressure': { kind: 'shared-prefix', groups: 12, usersPerGroup: 4, systemTokens: 1400, questionTokens: 100, outputTokens: 16, ratePerS: 2, durationS: 60, seed: 2 },
  // 8 agents × 1,100 tokens plus 16 growing histories: they fit the fleet once agents are split.
  sessions: { kind: 'sessions', agents: 8, sessionsPerAgent: 2, turns: 5, systemTokens: 1100, userTokens: 40, outputTokens: 16, thinkMs: [1000, 2500], startSpreadMs: 20_000, seed: 3 },
  // 12 agents × 1,100 tokens (13.2K) plus 24 growing histories against 12K of cache.
  'sessions-pressure': { kind: 'sessions', agents: 12, sessionsPerAgent: 2, turns: 5, systemTokens: 1100, userTokens: 40, outputTokens: 16, thinkMs: [1000, 2500], startSpreadMs: 30_000, seed: 3 },
};

/** Ids the random text is drawn from: above the special tokens, below the vocabulary's end. */
export interface Vocab {
  first: number;
  end: number;
}

export const TINY_LLAMA_VOCAB: Vocab = { first: 5, end: 4844 };

function ids(rand: () => number, n: number, v: Vocab): number[] {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push(v.first + Math.floor(rand() * (v.end - v.first)));
  return out;
}

export interface PlannedShared {
  atMs: number;
  group: number;
  user: number;
}

export interface SharedPlan {
  system: number[][];
  /** [group][user] */
  questions: number[][][];
  requests: PlannedShared[];
}

export function planShared(w: SharedPrefixWorkload, v: Vocab = TINY_LLAMA_VOCAB): SharedPlan {
  const rand = mulberry32(w.seed);
  const system = Array.from({ length: w.groups }, () => ids(rand, w.systemTokens, v));
  const questions = system.map(() => Array.from({ length: w.usersPerGroup }, () => ids(rand, w.questionTokens, v)));
  const prompts: { group: number; user: number }[] = [];
  for (let g = 0; g < w.groups; g++) for (let u = 0; u < w.usersPerGroup; u++) prompts.push({ group: g, user: u });
  for (let i = prompts.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [prompts[i], prompts[j]] = [prompts[j], prompts[i]];
  }
  const n = Math.round(w.ratePerS * w.durationS);
  if (w.zipf === undefined) {
    const requests = Array.from({ length: n }, (_, i) => ({ atMs: (i * 1000) / w.ratePerS, ...prompts[i % prompts.length] }));
    return { system, questions, requests };
  }
  const weights = Array.from({ length: w.groups }, (_, g) => 1 / (g + 1) ** w.zipf!);
  const total = weights.reduce((a, b) => a + b, 0);
  const pick = () => {
    let x = rand() * total;
    for (let g = 0; g < w.groups; g++) if ((x -= weights[g]) < 0) return g;
    return w.groups - 1;
  };
  // The popular groups are not the first to arrive: which groups are hot is shuffled too.
  const rank = Array.from({ length: w.groups }, (_, g) => g);
  for (let i = rank.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [rank[i], rank[j]] = [rank[j], rank[i]];
  }
  const requests = Array.from({ length: n }, (_, i) => ({ atMs: (i * 1000) / w.ratePerS, group: rank[pick()], user: Math.floor(rand() * w.usersPerGroup) }));
  return { system, questions, requests };
}

export interface PlannedSession {
  agent: number;
  startMs: number;
  users: number[][];
  thinkMs: number[];
}

export interface SessionsPlan {
  system: number[][];
  sessions: PlannedSession[];
}

export function planSessions(w: SessionsWorkload, v: Vocab = TINY_LLAMA_VOCAB): SessionsPlan {
  const rand = mulberry32(w.seed);
  const system = Array.from({ length: w.agents }, () => ids(rand, w.systemTokens, v));
  const sessions: PlannedSession[] = [];
  const count = w.agents * w.sessionsPerAgent;
  for (let s = 0; s < count; s++) {
    sessions.push({
      agent: s % w.agents,
      startMs: (s * w.startSpreadMs) / count,
      users: Array.from({ length: w.turns }, () => ids(rand, w.userTokens, v)),
      thinkMs: Array.from({ length: w.turns }, () => w.thinkMs[0] + rand() * (w.thinkMs[1] - w.thinkMs[0])),
    });
  }
  return { system, sessions };
}

/**
 * A shared-prefix workload as a trace without a real fleet: prompts straight in token ids (no
 * detokenize and retokenize, so lengths are exact), answers of random ids, on the real fleet's
 * capacities. For trying placement over many orders of the same workload (`seed`) in virtual time.
 */
export function syntheticSharedTrace(w: SharedPrefixWorkload, seed: number, engine: Trace['engine'], replicas = 2, v: Vocab = TINY_LLAMA_VOCAB): Trace {
  const plan = planShared({ ...w, seed });
  const rand = mulberry32(seed * 7 + 1);
  return {
    kind: 'warmroute-trace', workload: `${w.groups}x${w.usersPerGroup} seed ${seed}`, strategy: 'synthetic', when: '', engine,
    replicas: Array.from({ length: replicas }, (_, i) => `r${i}`), counters: Array.from({ length: replicas }, () => ({ queries: 0, hits: 0 })),
    requests: plan.requests.map((p) => ({
      atMs: p.atMs, replica: 0, route: null, group: `g${p.group}`, promptIds: [...plan.system[p.group], ...plan.questions[p.group][p.user]],
      outputIds: ids(rand, w.outputTokens, v), cachedTokens: 0, ttftMs: null, totalMs: 0, error: null,
    })),
  };
}

/** inference-perf's shared_prefix data with `enable_multi_turn_chat`, on /v1/completions. */
export type MultiTurnWorkload = Omit<SharedPrefixWorkload, 'kind' | 'seed'> & {
  /** vLLM's --max-model-len: a longer prompt is refused before it touches the cache. */
  maxModelLen: number;
};

/** The witness's multi-turn workload (bench/witness/config.ts), on the real fleet's max-model-len. */
export const MULTI_TURN: MultiTurnWorkload = { groups: 8, usersPerGroup: 3, systemTokens: 600, questionTokens: 50, outputTokens: 16, ratePerS: 2, durationS: 60, maxModelLen: 4608 };

/**
 * inference-perf's multi-turn sessions as it sends them (0.7.0, `UserSessionCompletionAPIData`):
 * each user a session keyed by x-session-id, whose context starts as its group's system prompt; a
 * turn's prompt is the context, then the user's own prompt (the system prompt and a question
 * again), and its context after it is that prompt and the answer. Requests cycle through the
 * sessions in one shuffled order at a constant rate, so a session's turns are one cycle apart; a
 * prompt past max-model-len is refused (kept in the trace, as the real run fails it, uncounted).
 * No prompt declares its shared part: a router learns it from what is warm, or groups nothing.
 */
export function syntheticMultiTurnTrace(w: MultiTurnWorkload, seed: number, engine: Trace['engine'], replicas = 2, v: Vocab = TINY_LLAMA_VOCAB): Trace {
  const rand = mulberry32(seed);
  const system = Array.from({ length: w.groups }, () => ids(rand, w.systemTokens, v));
  const users: { own: number[]; context: number[] }[] = [];
  for (let g = 0; g < w.groups; g++) for (let u = 0; u < w.usersPerGroup; u++) users.push({ own: [...system[g], ...ids(rand, w.questionTokens, v)], context: system[g] });
  for (let i = users.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [users[i], users[j]] = [users[j], users[i]];
  }
  const n = Math.round(w.ratePerS * w.durationS);
  return {
    kind: 'warmroute-trace', workload: `multi-turn ${w.groups}x${w.usersPerGroup} seed ${seed}`, strategy: 'synthetic', when: '', engine,
    replicas: Array.from({ length: replicas }, (_, i) => `127.0.0.1:${i + 1}`), counters: Array.from({ length: replicas }, () => ({ queries: 0, hits: 0 })),
    requests: Array.from({ length: n }, (_, i) => {
      const u = users[i % users.length];
      const promptIds = [...u.context, ...u.own];
      const outputIds = ids(rand, w.outputTokens, v);
      const ok = promptIds.length + w.outputTokens <= w.maxModelLen;
      if (ok) u.context = [...promptIds, ...outputIds];
      return {
        atMs: (i * 1000) / w.ratePerS, replica: 0, route: null, group: `s${i % users.length}`, promptIds, outputIds, sessionKey: `user_session_${i % users.length}`,
        cachedTokens: ok ? 0 : null, ttftMs: null, totalMs: 0, error: ok ? null : 'prompt longer than max-model-len',
      };
    }),
  };
}
