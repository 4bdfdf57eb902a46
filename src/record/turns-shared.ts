import { nowMs } from '../telemetry/hop-clock.js';
import type { TurnCall, TurnChannel, TurnOpened } from '../store/types.js';
import { MAX_CALLS_KEPT, toMono, toWall, type Call, type Session, type Turn, type TurnCloseCause } from './turn-state.js';

export interface TurnSharingDeps {
  readonly shared: TurnChannel;
  readonly enabled: () => boolean;
  readonly sessions: Map<string, Session>;
  /** Sessions with an open turn (turns.ts's idle sweep). */
  readonly active: Map<string, Session>;
  newSession(id: string, now: number): Session;
  finish(s: Session, t: Turn, cause: TurnCloseCause, now: number): void;
  touch(s: Session, now: number): void;
}

/**
 * What a gateway hears of other gateways' caller turns (a shared store's turn channel): a turn
 * another opened — the next one, whose opening closes this gateway's open turn of the session, or
 * the same one opened in the same moment, which the gateway with the lesser id counts — and the
 * calls other gateways served of the turns this one counts.
 */
export function listenToOtherGateways(d: TurnSharingDeps): void {
  const { shared, sessions, active, newSession, finish, touch } = d;
  /** Another gateway opened a turn of a session: the next one, or (the same moment) the same one. */
  function heardOpened(n: TurnOpened) {
    if (!d.enabled()) return;
    const now = nowMs();
    let s = sessions.get(n.session);
    if (s === undefined) s = newSession(n.session, now);
    const t = s.current;
    if (t !== null && !t.done && t.index >= n.index) {
      if (t.index > n.index || t.utterance !== n.utterance || t.anchor !== n.anchor || n.owner > shared.instance) return;
      // Both opened this turn; the other counts it. The calls that ended here go there now, the rest as they end.
      t.owner = n.owner;
      t.closing = 'next';
      for (const c of t.calls) if (c.ended > 0) shared.called({ session: s.id, index: t.index, owner: n.owner, received: toWall(c.received), sent: toWall(c.sent), firstToken: toWall(c.firstToken), ended: toWall(c.ended) });
      s.current = null;
      active.delete(s.id);
      if (t.open === 0) t.done = true;
    } else if (t !== null && !t.done) {
      t.closing = 'next';
      if (t.open === 0) finish(s, t, 'next', now);
      if (s.current === t) { s.current = null; active.delete(s.id); }
    }
    s.next = Math.max(s.next, n.index + 1);
    s.remote = n;
    s.remoteCalls = 1;
    touch(s, now);
  }

  /** A call another gateway served of a turn this one counts. */
  function heardCall(c: TurnCall) {
    if (!d.enabled()) return;
    const s = sessions.get(c.session);
    const t = s?.current;
    if (s === undefined || t == null || t.done || t.index !== c.index || t.owner !== null) return;
    const call: Call = { received: toMono(c.received), sent: toMono(c.sent), firstToken: toMono(c.firstToken), ended: toMono(c.ended) };
    t.callCount++;
    if (t.calls.length < MAX_CALLS_KEPT) t.calls.push(call);
    touch(s, nowMs());
  }
  shared.onOpened(heardOpened);
  shared.onCalled(heardCall);
}
