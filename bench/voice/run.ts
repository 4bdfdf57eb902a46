// One strategy's run: every session of the workload drives its conversation concurrently through
// the gateway, or for the oracle straight to the replica chosen for it (think time between turns),
// each request recorded with the client's timings and the gateway's headers. A duration cap stops
// sessions from starting new turns; a per-request timeout bounds every exchange, so the run ends in
// bounded time whatever the gateway does.

import { randomBytes } from 'node:crypto';
import type { Agent } from 'node:http';
import { keepAliveAgent, readChatEvent, streamExchange, type Exchange } from './client.js';
import { dialogueOf, type Api, type DialogueRequest } from './dialogue.js';
import type { SentRequest } from './ideal.js';
import { DEFAULT_IDENTITY_OPTIONS, identify } from '../../src/identify/identity.js';
import { callsPlan, driveTurn, preCallRequest, type AgentKind, type ClientTurn, type PreCall } from './orchestrated.js';
import type { KeyMode, SessionPlan, Workload } from './workload.js';

export interface TurnRecord {
  strategy: string;
  session: number;
  group: number;
  turn: number;
  /** 0: the caller's turn; 1: the follow-up after a tool result. */
  step: number;
  /** Orchestrated agent: the pre-call this request was (classification, extraction, ...); absent for the answer. */
  call?: PreCall;
  keyMode: KeyMode;
  /** ms after the run started. */
  sentMs: number;
  ttftMs: number | null;
  totalMs: number;
  status: number;
  ok: boolean;
  error: string | null;
  /** The gateway's x-warmroute-replica; with no gateway, the replica the client sent to. */
  replica: string | null;
  /** Gateway only (x-warmroute-route, Server-Timing): null and {} when the client went direct. */
  route: string | null;
  hops: Record<string, number>;
  promptTokens: number | null;
  cachedTokens: number | null;
  completionTokens: number | null;
  toolCall: boolean;
  /** Filled in after the run by the ideal model (ideal.ts). */
  idealCachedTokens: number | null;
  /** The trace this request started (RunOptions.traced). */
  traceId?: string;
}

/**
 * The key the gateway's admin view knows a session by: its key, or (keyless) its conversation key,
 * which is its placement key until its second utterance (the latest one holds every turn).
 */
function adminKeyOf(headers: Record<string, string>, body: Record<string, unknown>): string | null {
  const id = identify('chat', body, headers, DEFAULT_IDENTITY_OPTIONS);
  return id.sessionKey ?? id.conversationKey;
}

export interface RunProgress {
  done: number;
  total: number;
  inflight: number;
  elapsedMs: number;
}

/** A replica the client talks to with no gateway in between, and its name for the records. */
export interface Direct {
  url: string;
  replica: string;
}

export interface RunOptions {
  /** The gateway; unused for sessions that have a `direct` replica. */
  url?: string;
  /** Several gateways (sharing pins through Redis): every request goes to one of them at random. */
  urls?: readonly string[];
  /** Seeds the choice of gateway per request. */
  random?: () => number;
  /** Per session index: send its every request straight to this replica (the oracle placement). */
  direct?: readonly Direct[];
  strategy: string;
  /** Chat completions (default) or the Responses API (dialogue.ts). */
  api?: Api;
  /** The single-prompt voice agent (default) or the orchestrated one (orchestrated.ts; chat only). */
  voiceAgent?: AgentKind;
  workload: Workload;
  maxDurationMs: number;
  requestTimeoutMs: number;
  agent?: Agent;
  onProgress?(p: RunProgress): void;
  /**
   * Adjusts each request before it is sent (bench:peers: the session key in the header a peer
   * router reads, a shorter answer for a CPU fleet). Called with a fresh request every time.
   */
  adjust?(session: SessionPlan, req: Pick<DialogueRequest, 'headers' | 'body'>): void;
  /** Each request starts a trace of its own (a sampled traceparent); its id goes in the record. */
  traced?: boolean;
}

export interface StrategyRun {
  strategy: string;
  records: TurnRecord[];
  /** Per caller turn, as the client measured it (turn-stats.ts). */
  turns: ClientTurn[];
  /** Aligned with `records`: what was sent and received, for the ideal model (not serialised). */
  sent: SentRequest[];
  durationMs: number;
  truncated: boolean;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Where session `si` sends its requests; the replica is known up front only when there is no gateway. */
function destination(o: RunOptions, si: number): { url: string; replica: string | null } {
  const d = o.direct?.[si];
  if (d) return d;
  const url = o.url ?? o.urls?.[0];
  if (url === undefined) throw new Error(`runStrategy: no gateway url and no direct replica for session ${si}`);
  return { url, replica: null };
}

/** Requests the plan implies: one per turn plus one follow-up per tool turn. */
export function plannedRequests(w: Workload): number {
  return w.sessions.reduce((n, s) => n + s.turns.length + s.turns.filter((t) => t.tool).length, 0);
}

export async function runStrategy(o: RunOptions): Promise<StrategyRun> {
  // Resolved before anything starts: a missing destination must not leave half a run in flight.
  const dest = o.workload.sessions.map((_, si) => destination(o, si));
  const agent = o.agent ?? keepAliveAgent();
  const t0 = performance.now();
  const deadline = t0 + o.maxDurationMs;
  const records: TurnRecord[] = [];
  const sent: SentRequest[] = [];
  const turns: ClientTurn[] = [];
  const agentKind = o.voiceAgent ?? 'single';
  if (agentKind === 'orchestrated' && (o.api ?? 'chat') !== 'chat') throw new Error('the orchestrated agent runs over chat completions only');
  const callsOf = callsPlan(o.workload, agentKind);
  const total = plannedRequests(o.workload);
  let inflight = 0;
  let truncated = false;
  const tick = () => o.onProgress?.({ done: records.length, total, inflight, elapsedMs: performance.now() - t0 });
  const ticker = setInterval(tick, 250);

  const session = async (si: number) => {
    const plan = o.workload.sessions[si];
    const group = o.workload.groups[plan.group];
    const dialogue = dialogueOf(o.api ?? 'chat', plan, group);
    await sleep(plan.startMs);
    /**
     * One request: the caller's utterance (step 0), or (null) the follow-up after a tool result.
     * `complete`: a 200 whose answer arrived whole; the record's `ok` also wants a first token.
     */
    let adminKey: string | null = null;
    const exchange = async (turn: number, step: number, user: string | null, pre?: PreCall): Promise<{ x: Exchange; complete: boolean }> => {
      const pc = pre === undefined ? null : preCallRequest(plan, group, dialogue.messages, user ?? '', pre);
      const req = pc ?? dialogue.next(user);
      o.adjust?.(plan, req);
      const traceId = o.traced ? randomBytes(16).toString('hex') : undefined;
      if (traceId) req.headers = { ...req.headers, traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` };
      const messages = pc?.messages ?? dialogue.messages.slice();
      adminKey = adminKeyOf(req.headers, req.body) ?? adminKey;
      inflight++;
      const url = o.urls && !o.direct?.[si] ? o.urls[Math.floor((o.random ?? Math.random)() * o.urls.length)] : dest[si].url;
      const x = await streamExchange(url, req.path, req.headers, req.body, agent, o.requestTimeoutMs, 'read' in req ? req.read : readChatEvent);
      inflight--;
      const complete = x.status === 200 && x.error === null && x.done;
      const ok = complete && x.ttftMs !== null;
      records.push({
        strategy: o.strategy, session: si, group: plan.group, turn, step, keyMode: plan.keyMode,
        sentMs: x.sentAt - t0, ttftMs: x.ttftMs, totalMs: x.totalMs, status: x.status, ok, error: ok ? null : x.error ?? 'incomplete',
        replica: dest[si].replica ?? x.replica, route: x.route, hops: x.hops, promptTokens: x.promptTokens, cachedTokens: x.cachedTokens,
        completionTokens: x.completionTokens, toolCall: x.toolCall !== null, idealCachedTokens: null, ...(pre ? { call: pre } : {}), ...(traceId ? { traceId } : {}),
      });
      sent.push({ sentAt: x.sentAt, messages, tools: pc ? pc.tools : group.tools, content: x.content, toolCall: x.toolCall, finishReason: x.finishReason });
      if (!pc) dialogue.settle(x, complete, step);
      return { x, complete };
    };
    for (let turn = 0; turn < plan.turns.length; turn++) {
      if (performance.now() > deadline) {
        truncated = true;
        return;
      }
      turns.push(await driveTurn({ strategy: o.strategy, session: si, turn, user: plan.turns[turn].user, calls: callsOf[si][turn], adminKey: () => adminKey, exchange, dialogue }));
      if (turn < plan.turns.length - 1) await sleep(plan.turns[turn].thinkMs);
    }
  };

  try {
    await Promise.all(o.workload.sessions.map((_, i) => session(i)));
  } finally {
    clearInterval(ticker);
    if (!o.agent) agent.destroy();
  }
  tick();
  return { strategy: o.strategy, records, turns, sent, durationMs: performance.now() - t0, truncated };
}
