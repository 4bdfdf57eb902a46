import type { RequestIdentity } from '../identify/identity.js';
import type { HopClock } from '../telemetry/hop-clock.js';
import { nowMs } from '../telemetry/hop-clock.js';
import type { Metrics } from '../telemetry/metrics.js';
import type { TurnChannel, TurnOpened } from '../store/types.js';
import { MAX_CALLS_KEPT, overlapCount, toWall, TURN_CLOSE_CAUSES, wall, type Call, type Placed, type Session, type Turn, type TurnCloseCause, type TurnSummary, type TurnWords } from './turn-state.js';
import { listenToOtherGateways } from './turns-shared.js';

/**
 * Caller turns: every call of a session whose conversation ends in the same last user message
 * (classification and extraction calls, tool loops, the final answer) is one turn; a new user
 * message starts the next. Found from what identify/ already computed (the utterance hash, the
 * chain's links, the session key or placement key) and, for the Responses API, from which session
 * produced the previous response. Nothing here reads the body.
 */

export interface TurnsOptions {
  readonly enabled: boolean;
  /** A turn with no call in flight and none arriving for this long is closed. */
  readonly idleMs: number;
  /** The caller's wait past this counts in warmroute_turns_over_budget_total. */
  readonly budgetMs: number;
  /** Sessions followed (least recently active first out); also bounds the response → session map. */
  readonly maxSessions: number;
  /** Closed turns kept per session for the admin view. */
  readonly keep: number;
}

export { TURN_CLOSE_CAUSES, type TurnCloseCause, type TurnSummary } from './turn-state.js';

/** Where a request fell: written in its access line. */
export interface TurnPlace {
  readonly turn: number;
  readonly call: number;
}

/** A request's call in a turn, from `arrived` to `ended` (held by the request, not in a map keyed by it). */
export type TurnCall = Placed;

export interface Turns {
  /** A request routed: joins its session's open turn or starts the next one; null: not part of any turn. */
  arrived(identity: RequestIdentity, clock: HopClock): TurnCall | null;
  /** The request of `call` ended: its times are taken from the clock. Once per call. */
  ended(call: TurnCall, clock: HopClock, responseId: string | null): TurnPlace;
  /** A session's closed turns, oldest first, then the open one; null: unknown session. */
  lastTurns(key: string): { open: { index: number; calls: number } | null; turns: TurnSummary[] } | null;
  /** Forgets a session (DELETE /admin/sessions/{key}); an open turn is closed as evicted first. */
  forget(key: string): boolean;
  /** Closes turns idle past idleMs (the timer calls it; tests may too). */
  sweep(now?: number): void;
  setOptions(o: TurnsOptions): void;
  close(): void;
}


/**
 * `shared`: the turn channel of a shared store. A turn is counted by the gateway that opened it; the
 * others, told at once, count the calls they serve of it as its calls (sent there when each ends)
 * and close their own open turn of the session when another gateway opens the next one. Two
 * gateways that open the same turn in the same moment (before either heard of the other) settle
 * it as the one with the lesser id counting it.
 */
export function createTurns(opts: TurnsOptions, metrics: Metrics, shared?: TurnChannel): Turns {
  let o = opts;
  /** Every session followed, least recently active first (a Map keeps insertion order). */
  const sessions = new Map<string, Session>();
  /** Sessions with an open turn, least recently active first: the idle sweep reads from the front. */
  const active = new Map<string, Session>();
  /** Responses API: response id → the session that produced it (previous_response_id follows it). */
  const responses = new Map<string, string>();
  const closedBy = Object.fromEntries(TURN_CLOSE_CAUSES.map((c) => [c, metrics.turns.labels(c)])) as Record<TurnCloseCause, ReturnType<typeof metrics.turns.labels>>;
  for (const c of TURN_CLOSE_CAUSES) closedBy[c].inc(0);

  function touch(s: Session, now: number) {
    s.lastActivity = now;
    sessions.delete(s.id);
    sessions.set(s.id, s);
    if (s.current !== null && !s.current.done) {
      active.delete(s.id);
      active.set(s.id, s);
    }
  }

  function finish(s: Session, t: Turn, cause: TurnCloseCause, now: number) {
    if (t.done) return;
    t.done = true;
    if (s.current === t) {
      s.current = null;
      active.delete(s.id);
    }
    if (t.owner !== null) return; // counted where it was opened first
    let last: Call | null = null;
    let llm = 0;
    for (const c of t.calls) {
      // By arrival: another gateway's calls are added as they are reported, not in order.
      if (c.firstToken > 0 && (last === null || c.received >= last.received)) last = c;
      if (c.sent > 0 && c.ended > c.sent) llm += c.ended - c.sent;
    }
    const wait = last === null ? null : last.firstToken - t.started;
    const over = wait !== null && wait > o.budgetMs;
    const overlapped = overlapCount(t.calls, now);
    metrics.turnCalls.observe(t.callCount);
    if (wait !== null) metrics.turnWait.observe(wait / 1000);
    metrics.turnLlm.observe(llm / 1000);
    if (over) metrics.turnsOverBudget.inc();
    closedBy[cause].inc();
    s.history.push({
      index: t.index, calls: t.callCount, sequential: t.calls.length - overlapped, overlapped,
      waitMs: wait === null ? null : Math.round(wait * 1000) / 1000, llmMs: Math.round(llm * 1000) / 1000,
      overBudget: over, startedAt: wall(t.started), closedBy: cause,
    });
    while (s.history.length > o.keep) s.history.shift();
  }

  function sessionIdOf(identity: RequestIdentity): string | null {
    if (identity.sessionKey !== null) return `k:${identity.sessionKey}`;
    if (identity.storedResponseId !== null) {
      const prev = responses.get(identity.storedResponseId);
      if (prev !== undefined) return prev;
    }
    // Keyless: the conversation key, so that callers who open with the same words are two sessions
    // from their second utterance on (before it they are the same bytes).
    if (identity.conversationKey !== null && identity.kind !== 'completion') return `p:${identity.conversationKey}`;
    return null;
  }

  /** Whether this call belongs to the session's open turn. */
  function sameTurn(t: TurnWords, identity: RequestIdentity): boolean {
    const u = identity.utterance;
    // No user message of its own (a tool result sent back, a Responses continuation with only
    // function_call_output): it carries on the turn that is open.
    if (u === null) return true;
    if (u !== t.utterance) return false;
    // The same words again, in a conversation that already holds this turn's user message earlier
    // on: the caller said it twice, the second is the next turn.
    return !(t.anchor !== null && identity.lastUser > t.anchorIndex && identity.chain[t.anchorIndex] === t.anchor);
  }

  function newSession(id: string, now: number): Session {
    while (sessions.size >= o.maxSessions) {
      const [oldId, old] = sessions.entries().next().value as [string, Session];
      if (old.current !== null) finish(old, old.current, 'evicted', now);
      sessions.delete(oldId);
      active.delete(oldId);
    }
    return { id, next: 0, current: null, lastActivity: now, history: [], remote: null, remoteCalls: 0 };
  }

  /** The session a response belongs to, for the call that names it as `previous_response_id`. */
  function rememberResponse(responseId: string, session: string) {
    responses.delete(responseId);
    responses.set(responseId, session);
    if (responses.size > o.maxSessions) responses.delete(responses.keys().next().value as string);
  }

  if (shared !== undefined) {
    listenToOtherGateways({ shared, enabled: () => o.enabled, sessions, active, newSession, finish, touch });
    // The next call of a keyless Responses chain may come to any gateway: each hears whose it is.
    shared.onResponded((r) => { if (o.enabled) rememberResponse(r.response, r.session); });
  }

  const timer = setInterval(() => sweep(), 250);
  timer.unref();

  function sweep(now = nowMs()) {
    for (const s of active.values()) {
      if (now - s.lastActivity <= o.idleMs) break;
      const t = s.current;
      if (t === null || t.done) { active.delete(s.id); continue; }
      if (t.open > 0) {
        // A call still streams (it ends by itself: timeouts bound it): look again later.
        active.delete(s.id);
        active.set(s.id, s);
        s.lastActivity = now;
        continue;
      }
      finish(s, t, 'idle', now);
    }
  }

  return {
    arrived(identity, clock) {
      if (!o.enabled) return null;
      const id = sessionIdOf(identity);
      if (id === null) return null;
      const now = clock.received;
      let s = sessions.get(id);
      let openedFrom: Session | undefined;
      if (s === undefined) {
        s = newSession(id, now);
        // A keyless conversation's first call under its own key (its second utterance): it goes on
        // from its opening's session, shared with whoever opened with the same words. Its open
        // turn ends here as it would have at this next utterance, and is counted once.
        const opening = identity.sessionKey === null && identity.placementKey !== identity.conversationKey ? sessions.get(`p:${identity.placementKey}`) : undefined;
        if (opening !== undefined) {
          const t = opening.current;
          if (t !== null && !t.done) {
            t.closing = 'next';
            if (t.open === 0) finish(opening, t, 'next', now);
            if (opening.current === t) { opening.current = null; active.delete(opening.id); }
          }
          s.next = opening.next;
          s.history.push(...opening.history);
          openedFrom = opening;
        }
      }
      let t = s.current;
      if (t !== null && (now - s.lastActivity > o.idleMs && t.open === 0)) {
        finish(s, t, 'idle', now);
        t = null;
      }
      const r = s.remote;
      if (r !== null && (t === null || r.index > t.index)) {
        if (sameTurn(r, identity)) {
          // A call of the turn another gateway opened: it is counted there.
          const placed: Placed = { session: s, turn: null, call: s.remoteCalls++, foreign: r };
          touch(s, now);
          return placed;
        }
        s.remote = null;
      }
      if (t === null || !sameTurn(t, identity)) {
        if (t !== null) {
          t.closing = 'next';
          if (t.open === 0) finish(s, t, 'next', now);
          // Else it is finished when its last call ends.
          if (s.current === t) s.current = null;
        }
        const anchorIndex = identity.lastUser;
        t = {
          index: s.next++, utterance: identity.utterance,
          anchor: anchorIndex >= 0 && anchorIndex < identity.chain.length ? identity.chain[anchorIndex] : null, anchorIndex,
          started: now, calls: [], callCount: 0, open: 0, closing: null, done: false, owner: null,
        };
        s.current = t;
        shared?.opened({ session: s.id, index: t.index, utterance: t.utterance, anchor: t.anchor, anchorIndex: t.anchorIndex, owner: shared.instance });
        // The opening's turn may be another gateway's: told under the opening's id, it closes there.
        if (openedFrom !== undefined) shared?.opened({ session: openedFrom.id, index: t.index, utterance: t.utterance, anchor: t.anchor, anchorIndex: t.anchorIndex, owner: shared.instance });
      }
      const call = t.callCount++;
      if (t.calls.length < MAX_CALLS_KEPT) t.calls.push({ received: now, sent: 0, firstToken: 0, ended: 0 });
      t.open++;
      const placed: Placed = { session: s, turn: t, call, foreign: null };
      touch(s, now);
      return placed;
    },
    ended(p, clock, responseId) {
      const { session: s, turn: t, call, foreign } = p;
      const owner = foreign?.owner ?? t?.owner ?? null;
      if (owner !== null) {
        shared?.called({ session: s.id, index: foreign?.index ?? (t as Turn).index, owner, received: toWall(clock.received), sent: toWall(clock.sent), firstToken: toWall(clock.firstToken), ended: toWall(clock.ended || nowMs()) });
      }
      if (responseId) {
        rememberResponse(responseId, s.id);
        shared?.responded({ response: responseId, session: s.id });
      }
      if (t === null) return { turn: (foreign as TurnOpened).index, call };
      const c = t.calls[call];
      if (c !== undefined) {
        c.sent = clock.sent;
        c.firstToken = clock.firstToken;
        c.ended = clock.ended || nowMs();
      }
      t.open--;
      const now = c?.ended ?? nowMs();
      if (!t.done) {
        if (t.closing !== null && t.open === 0) finish(s, t, t.closing, now);
        else if (s.current === t) touch(s, now);
      }
      return { turn: t.index, call };
    },
    lastTurns(key) {
      const s = sessions.get(`k:${key}`) ?? sessions.get(`p:${key}`);
      if (s === undefined) return null;
      const t = s.current;
      return { open: t === null || t.done ? null : { index: t.index, calls: t.callCount }, turns: [...s.history] };
    },
    forget(key) {
      let found = false;
      for (const id of [`k:${key}`, `p:${key}`]) {
        const s = sessions.get(id);
        if (s === undefined) continue;
        if (s.current !== null) finish(s, s.current, 'evicted', nowMs());
        sessions.delete(id);
        active.delete(id);
        found = true;
      }
      return found;
    },
    sweep,
    setOptions(next) { o = next; },
    close() { clearInterval(timer); },
  };
}
