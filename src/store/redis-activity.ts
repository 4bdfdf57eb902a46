import type { SessionTurn } from './types.js';

export interface ActivityOptions {
  /** Sends one message on the activity channel; rejects when Redis cannot take it. */
  publish(message: string): Promise<unknown>;
  /** This gateway's instance id: its own messages come back through the subscriber and are skipped. */
  instance: string;
  /** Longest a turn waits before it is published (the batch interval): the staleness bound's main term. */
  flushMs: number;
  /** Turns held for the next batch at most; past it the oldest unsent go (they are re-announced next turn). */
  maxPending: number;
  now: () => number;
  /** A publish failed (counted by the store; the turns of that batch are not retried). */
  failed(err: unknown): void;
  /** A batch went out with this many turns. */
  sent(turns: number): void;
  /** A message on the channel that is not a batch of turns (another build, or garbage): skipped. */
  malformed(): void;
}

export interface SessionActivity {
  /** Queues a turn for every other gateway; `now` sends it (and what is queued) at once. */
  announce(turn: SessionTurn, now: boolean): void;
  /** A message off the activity channel: other gateways' turns, for the listeners. */
  receive(message: string): void;
  onTurn(listener: (turn: SessionTurn) => void): void;
  close(): void;
}

// One message: `t|<instance>|` + a JSON array of [key, replica, agent, agentTokens, promptTokens, at, replaces?].
// A session key may hold any byte but NUL, so the turns go as JSON rather than in a separator format.
type Wire = [string, string, string | null, number, number, number, string?];

/**
 * Each session's turns, shared between gateways by Redis pub/sub so that every gateway's working
 * set (routing/working-set.ts) counts every gateway's sessions. A pin is published when it moves;
 * a turn on an unmoved pin is not, so without this another gateway would see a session only as long
 * as its last move. Turns are batched: one PUBLISH per `flushMs` per gateway whatever the request
 * rate, and nothing stored in Redis (a gateway that starts, or whose subscriber was away, hears
 * every active session again at its next turn). A fresh placement goes at once: sessions that start
 * together on different gateways must see each other before they are placed.
 */
export function createSessionActivity(o: ActivityOptions): SessionActivity {
  const pending = new Map<string, SessionTurn>();
  const listeners: ((turn: SessionTurn) => void)[] = [];
  let timer: NodeJS.Timeout | null = null;
  let closed = false;

  function flush() {
    if (timer !== null) clearTimeout(timer);
    timer = null;
    if (pending.size === 0 || closed) return;
    const wire: Wire[] = [];
    for (const t of pending.values()) wire.push(t.replaces === undefined ? [t.key, t.replica, t.agent, t.agentTokens, t.promptTokens, t.at] : [t.key, t.replica, t.agent, t.agentTokens, t.promptTokens, t.at, t.replaces]);
    pending.clear();
    o.publish(`t|${o.instance}|${JSON.stringify(wire)}`).then(() => o.sent(wire.length), (e: unknown) => o.failed(e));
  }

  return {
    announce(turn, now) {
      if (closed) return;
      const queued = pending.get(turn.key);
      pending.delete(turn.key);
      // A later turn of the same session in the same batch keeps what the earlier one replaced.
      pending.set(turn.key, queued?.replaces !== undefined && turn.replaces === undefined ? { ...turn, replaces: queued.replaces } : turn);
      if (pending.size > o.maxPending) pending.delete(pending.keys().next().value as string);
      if (now) flush();
      else if (timer === null) timer = setTimeout(flush, o.flushMs).unref();
    },
    receive(message) {
      if (!message.startsWith('t|')) return;
      const bar = message.indexOf('|', 2);
      if (bar < 0 || message.slice(2, bar) === o.instance) return;
      let wire: unknown;
      try {
        wire = JSON.parse(message.slice(bar + 1));
      } catch {
        return o.malformed();
      }
      if (!Array.isArray(wire)) return o.malformed();
      const t = o.now();
      for (const w of wire as unknown[]) {
        if (!Array.isArray(w) || (w.length !== 6 && w.length !== 7) || typeof w[0] !== 'string' || typeof w[1] !== 'string') { o.malformed(); continue; }
        const [key, replica, agent, agentTokens, promptTokens, at, replaces] = w as Wire;
        if (!Number.isFinite(at) || !Number.isFinite(promptTokens) || !Number.isFinite(agentTokens)) { o.malformed(); continue; }
        // Another gateway's clock: a turn is never taken to be newer than now here.
        const turn: SessionTurn = {
          key, replica, agent: typeof agent === 'string' ? agent : null, agentTokens, promptTokens, at: Math.min(at, t),
          ...(typeof replaces === 'string' ? { replaces } : {}),
        };
        for (const l of listeners) l(turn);
      }
    },
    onTurn(listener) {
      listeners.push(listener);
    },
    close() {
      closed = true;
      if (timer !== null) clearTimeout(timer);
      timer = null;
      pending.clear();
    },
  };
}
