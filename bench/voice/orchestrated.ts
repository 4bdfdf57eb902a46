// The orchestrated voice agent of the second field report: before it answers, a turn may fire
// intent classification, a relevance check, location and time extraction and a query rewrite,
// each a call of its own with its own short prompt; some turns are answered from a canned
// template and call no model at all. The plan (how many calls each turn makes) comes from the
// seed, so every strategy sees the same turns.

import { createRng } from '../sim/hash.js';
import type { Exchange } from './client.js';
import { MAX_TOKENS, requestOf, type ChatMessage } from './conversation.js';
import type { Dialogue } from './dialogue.js';
import type { GroupPlan, SessionPlan, Workload } from './workload.js';

export const AGENTS = ['single', 'orchestrated'] as const;
export type AgentKind = (typeof AGENTS)[number];

/** The calls an orchestrated turn may make before its answer, in the order it makes them. */
export const PRE_CALLS = ['classify_intent', 'check_relevance', 'extract_location', 'extract_time', 'rewrite_query'] as const;
export type PreCall = (typeof PRE_CALLS)[number];

/** One caller turn as the client lived it. */
export interface ClientTurn {
  strategy: string;
  session: number;
  turn: number;
  /** LLM calls it made (0: canned). */
  calls: number;
  /** Some of its calls ran at once. */
  overlapped: boolean;
  /** null: no call of it produced content (it failed). */
  waitMs: number | null;
  ok: boolean;
  /** The key GET /admin/sessions/{key} knows the session by (session key, or its placement key when keyless). */
  adminKey: string | null;
  /** The gateway's figures for this turn, when it was read. */
  gatewayWaitMs: number | null;
  gatewayCalls: number | null;
}

/** Shares of turns: canned (no call), answered directly (1 call), orchestrated (2–6 calls). */
export const ORCHESTRATION = { canned: 0.3, direct: 0.3 } as const;
/** What a pre-call may generate: an intent word, a slot, a short rewrite. */
export const PRE_CALL_MAX_TOKENS = 12;
export const CANNED_ANSWER = 'Sure, one moment please.';

const TASKS: Record<PreCall, string> = {
  classify_intent: 'Classify the caller\'s last utterance as one intent: book, change, cancel, ask, complain, other. Answer with the intent only.',
  check_relevance: 'Is the caller\'s last utterance about this service? Answer yes or no.',
  extract_location: 'Extract the place the caller names as JSON {"location": ...}; null when none.',
  extract_time: 'Extract the date and time the caller names as JSON {"time": ...}; null when none.',
  rewrite_query: 'Rewrite the caller\'s last utterance as one self-contained search query.',
};

/** Per session, per turn: how many calls the turn makes (0 = canned). Single agent: always 1. */
export function callsPlan(w: Workload, agent: AgentKind): number[][] {
  return w.sessions.map((s) => {
    if (agent === 'single') return s.turns.map(() => 1);
    const r = createRng(w.options.seed * 31_337 + s.index);
    return s.turns.map((t, i) => {
      const u = r();
      const extra = 1 + Math.floor(r() * PRE_CALLS.length);
      // A tool turn and the first turn always reach the model.
      if (u < ORCHESTRATION.canned && i > 0 && t.tool === null) return 0;
      if (u < ORCHESTRATION.canned + ORCHESTRATION.direct) return 1;
      return 1 + extra;
    });
  });
}

/** The task prompt of one pre-call, for one agent (byte-stable: its prefix stays cached). */
export function taskPrompt(group: GroupPlan, call: PreCall): string {
  return `You are the ${group.domain} line's ${call.replace('_', ' ')} step. ${TASKS[call]}`;
}

/**
 * One pre-call's request. A keyed session sends the task's own prompt and the utterance alone (the
 * report's orchestration), no tools. A keyless one cannot be tied together by any key, so it sends
 * its conversation up to the utterance, with its tools, and the task as a trailing system message:
 * the calls of its turn share that prefix (and its prompt cache), which is all a gateway can follow.
 */
export function preCallRequest(session: SessionPlan, group: GroupPlan, history: readonly ChatMessage[], user: string, call: PreCall) {
  const task: ChatMessage = { role: 'system', content: taskPrompt(group, call) };
  const utterance: ChatMessage = { role: 'user', content: user };
  const messages: ChatMessage[] = session.keyMode === 'none' ? [...history, utterance, task] : [task, utterance];
  const { headers, body } = requestOf(session, group, messages);
  if (session.keyMode !== 'none') delete body.tools;
  body.max_tokens = Math.min(PRE_CALL_MAX_TOKENS, MAX_TOKENS);
  return { path: '/v1/chat/completions', headers, body, messages, tools: body.tools === undefined ? [] : group.tools };
}

/**
 * The pre-calls of a turn making `calls` calls, as groups run one after another; a group of two
 * runs at once (the two extractions, which need nothing from each other).
 */
export function preCallGroups(calls: number): PreCall[][] {
  const pre = PRE_CALLS.slice(0, Math.max(0, calls - 1));
  const groups: PreCall[][] = [];
  for (let i = 0; i < pre.length; i++) {
    if (pre[i] === 'extract_location' && pre[i + 1] === 'extract_time') {
      groups.push([pre[i], pre[i + 1]]);
      i++;
    } else {
      groups.push([pre[i]]);
    }
  }
  return groups;
}

export interface TurnDriver {
  strategy: string;
  session: number;
  turn: number;
  user: string;
  /** Calls this turn makes (callsPlan): 0 canned, 1 the answer alone, more: pre-calls then the answer. */
  calls: number;
  /** The session's key in the gateway's admin view, known once its first request was built. */
  adminKey(): string | null;
  /** One request of the session (run.ts): the utterance, (null) the follow-up after a tool result, or a pre-call. */
  exchange(turn: number, step: number, user: string | null, pre?: PreCall): Promise<{ x: Exchange; complete: boolean }>;
  dialogue: Dialogue;
}

/**
 * One caller turn, and the client's measure of it: its first request sent → first content of its
 * last call that produced any (a canned turn: the template's own time, no request).
 */
export async function driveTurn(d: TurnDriver): Promise<ClientTurn> {
  const base = { strategy: d.strategy, session: d.session, turn: d.turn, gatewayWaitMs: null, gatewayCalls: null };
  const t0 = performance.now();
  if (d.calls === 0) {
    d.dialogue.canned(d.user, CANNED_ANSWER);
    return { ...base, calls: 0, overlapped: false, waitMs: performance.now() - t0, ok: true, adminKey: d.adminKey() };
  }
  const made: { x: Exchange; complete: boolean }[] = [];
  let overlapped = false;
  for (const g of preCallGroups(d.calls)) {
    overlapped ||= g.length > 1;
    made.push(...await Promise.all(g.map((pre) => d.exchange(d.turn, 0, d.user, pre))));
  }
  const answer = await d.exchange(d.turn, 0, d.user);
  made.push(answer);
  // The agent speaks after the tool result, with no pause: part of the same caller turn.
  if (answer.complete && answer.x.toolCall) made.push(await d.exchange(d.turn, 1, null));
  const first = Math.min(...made.map((m) => m.x.sentAt));
  const last = made.filter((m) => m.x.ttftMs !== null).at(-1);
  return {
    ...base, calls: made.length, overlapped, ok: made.every((m) => m.complete), adminKey: d.adminKey(),
    waitMs: last ? last.x.sentAt + (last.x.ttftMs as number) - first : null,
  };
}
