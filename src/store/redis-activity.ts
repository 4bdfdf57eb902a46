import type { AdapterSent, PeerInflight, SessionTurn, TurnCall, TurnChannel, TurnOpened, TurnResponse } from './types.js';

/** How often a gateway sends what it batched on the activity channel: the shared fleet view's staleness bound. */
export const ACTIVITY_FLUSH_MS = 100;

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
  /** A batch went out with this many (replica, adapter) counts. */
  sentAdapters(entries: number): void;
  /** Another gateway's batch came in with this many (replica, adapter) counts. */
  heardAdapters(entries: number): void;
  /** This gateway's open requests went out (one message). */
  sentInflight(): void;
  /** Another gateway's open requests came in (one message). */
  heardInflight(): void;
  /** A message on the channel that is not a batch of turns (another build, or garbage): skipped. */
  malformed(): void;
}

export interface SessionActivity {
  /** Queues a turn for every other gateway; `now` sends it (and what is queued) at once. */
  announce(turn: SessionTurn, now: boolean): void;
  /** A message off the activity channel: other gateways' turns, for the listeners. */
  receive(message: string): void;
  onTurn(listener: (turn: SessionTurn) => void): void;
  /** Queues requests for a LoRA adapter routed to a replica, summed per (replica, adapter) until the batch goes; `now` sends at once. */
  announceAdapter(sent: AdapterSent, now: boolean): void;
  onAdapterSent(listener: (sent: AdapterSent) => void): void;
  /** Sends this gateway's open requests per replica at once (fleet/peer-inflight.ts paces the calls). */
  announceInflight(counts: ReadonlyMap<string, number>): void;
  onPeerInflight(listener: (peer: PeerInflight) => void): void;
  /** Caller turns (record/turns.ts) on the same channel: an opened turn, a served call and a relayed response's session, each sent at once. */
  readonly turns: TurnChannel;
  close(): void;
}

// One message: `t|<instance>|` + a JSON array of [key, replica, agent, agentTokens, promptTokens, at, replaces?].
// A session key may hold any byte but NUL, so the turns go as JSON rather than in a separator format.
type Wire = [string, string, string | null, number, number, number, string?];
// `a|<instance>|` + a JSON array of [replica, adapter, count, at]: a kind of its own, so that a
// gateway of an earlier build skips it (counted as malformed there) and keeps every turn.
type AdapterWire = [string, string, number, number];
// `f|<instance>|` + a JSON array of [replica, open requests], the replicas with none left out: the
// whole of what the gateway has open each time, so a message lost costs nothing past the next one.
type InflightWire = [string, number];

/**
 * Adds `sent` to a batch summed per replica and adapter (the count added, the later time kept),
 * holding at most `max` pairs (past it the oldest goes). The Redis channel's batching, and the
 * discrete-event run's (bench/scale/des/activity.ts).
 */
export function addAdapterSent(batch: Map<string, AdapterSent>, sent: AdapterSent, max: number): void {
  // NUL between the names: neither a replica's name nor a model id holds one.
  const k = `${sent.replica}\u0000${sent.adapter}`;
  const queued = batch.get(k);
  if (queued !== undefined) {
    batch.set(k, { ...sent, count: queued.count + sent.count, at: Math.max(queued.at, sent.at) });
    return;
  }
  if (batch.size >= max) batch.delete(batch.keys().next().value as string);
  batch.set(k, sent);
}

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
  const pendingAdapters = new Map<string, AdapterSent>();
  const adapterListeners: ((sent: AdapterSent) => void)[] = [];
  const inflightListeners: ((peer: PeerInflight) => void)[] = [];
  const openedListeners: ((turn: TurnOpened) => void)[] = [];
  const calledListeners: ((call: TurnCall) => void)[] = [];
  const respondedListeners: ((response: TurnResponse) => void)[] = [];
  const send = (m: string) => {
    if (!closed) o.publish(m).then(() => {}, (e: unknown) => o.failed(e));
  };
  const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);
  const num = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) ? v : NaN);

  /** The JSON after a message's `<kind>|<instance>|`; undefined (counted as malformed) when it is not. */
  function parsed(body: string): unknown {
    try {
      return JSON.parse(body);
    } catch {
      o.malformed();
      return undefined;
    }
  }

  /** `t|<instance>|[[key, replica, agent, agentTokens, promptTokens, at, replaces?], ...]`: an entry that is not one is skipped alone. */
  function receiveSessionTurns(wire: unknown) {
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
  }

  /** `a|<instance>|[[replica, adapter, count, at], ...]`: an entry that is not one is skipped alone. */
  function receiveAdapters(w: unknown) {
    if (!Array.isArray(w)) return o.malformed();
    const t = o.now();
    let heard = 0;
    for (const x of w as unknown[]) {
      if (!Array.isArray(x) || x.length !== 4 || typeof x[0] !== 'string' || typeof x[1] !== 'string') { o.malformed(); continue; }
      const [replica, adapter, count, at] = x as AdapterWire;
      if (!(Number.isFinite(count) && count > 0) || !Number.isFinite(at)) { o.malformed(); continue; }
      // Another gateway's clock: never taken to be newer than now here.
      const sent: AdapterSent = { replica, adapter, count, at: Math.min(at, t) };
      for (const l of adapterListeners) l(sent);
      heard++;
    }
    if (heard > 0) o.heardAdapters(heard);
  }

  /** `f|<instance>|[[replica, open requests], ...]`: the whole of what it has open, so skipped whole if any entry is not one. */
  function receiveInflight(from: string, w: unknown) {
    if (!Array.isArray(w)) return o.malformed();
    const counts = new Map<string, number>();
    for (const x of w as unknown[]) {
      if (!Array.isArray(x) || x.length !== 2 || typeof x[0] !== 'string' || !Number.isInteger(x[1]) || (x[1] as number) <= 0) return o.malformed();
      const [replica, n] = x as InflightWire;
      counts.set(replica, n);
    }
    o.heardInflight();
    for (const l of inflightListeners) l({ instance: from, counts });
  }

  /**
   * `o|<instance>|[session, index, utterance, anchor, anchorIndex]`, `c|<instance>|[session, index, owner, received, sent, firstToken, ended]`,
   * `r|<instance>|[response, session]`.
   */
  function receiveTurns(kind: string, from: string, w: unknown) {
    if (kind === 'r') {
      if (!Array.isArray(w) || w.length !== 2 || typeof w[0] !== 'string' || typeof w[1] !== 'string') return o.malformed();
      const response: TurnResponse = { response: w[0], session: w[1] };
      for (const l of respondedListeners) l(response);
      return;
    }
    if (!Array.isArray(w) || typeof w[0] !== 'string' || !Number.isInteger(w[1])) return o.malformed();
    if (kind === 'o' && w.length === 5) {
      const turn: TurnOpened = { session: w[0], index: w[1], utterance: str(w[2]), anchor: str(w[3]), anchorIndex: Number.isInteger(w[4]) ? w[4] : -1, owner: from };
      for (const l of openedListeners) l(turn);
      return;
    }
    if (kind === 'c' && w.length === 7 && w[2] === o.instance) {
      const call: TurnCall = { session: w[0], index: w[1], owner: w[2], received: num(w[3]), sent: num(w[4]), firstToken: num(w[5]), ended: num(w[6]) };
      if (Number.isNaN(call.received) || Number.isNaN(call.ended)) return o.malformed();
      for (const l of calledListeners) l(call);
      return;
    }
    if (kind !== 'c') o.malformed();
  }
  let timer: NodeJS.Timeout | null = null;
  let closed = false;
  /** What is queued goes at once (`now`), else with the next batch. */
  const schedule = (now: boolean) => {
    if (now) flush();
    else if (timer === null) timer = setTimeout(flush, o.flushMs).unref();
  };

  function flush() {
    if (timer !== null) clearTimeout(timer);
    timer = null;
    if (closed) return;
    if (pendingAdapters.size > 0) {
      const wire: AdapterWire[] = [];
      for (const x of pendingAdapters.values()) wire.push([x.replica, x.adapter, x.count, x.at]);
      pendingAdapters.clear();
      o.publish(`a|${o.instance}|${JSON.stringify(wire)}`).then(() => o.sentAdapters(wire.length), (e: unknown) => o.failed(e));
    }
    if (pending.size === 0) return;
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
      schedule(now);
    },
    announceAdapter(sent, now) {
      if (closed) return;
      addAdapterSent(pendingAdapters, sent, o.maxPending);
      schedule(now);
    },
    onAdapterSent(listener) {
      adapterListeners.push(listener);
    },
    announceInflight(counts) {
      if (closed) return;
      const wire: InflightWire[] = [];
      for (const [replica, n] of counts) if (n > 0) wire.push([replica, n]);
      o.publish(`f|${o.instance}|${JSON.stringify(wire)}`).then(() => o.sentInflight(), (e: unknown) => o.failed(e));
    },
    onPeerInflight(listener) {
      inflightListeners.push(listener);
    },
    receive(message) {
      const bar = message.indexOf('|', 2);
      if (message[1] !== '|' || bar < 0) return o.malformed();
      const from = message.slice(2, bar);
      if (from === o.instance) return;
      const kind = message[0];
      if (kind !== 't' && kind !== 'o' && kind !== 'c' && kind !== 'r' && kind !== 'a' && kind !== 'f') return o.malformed();
      const w = parsed(message.slice(bar + 1));
      if (w === undefined) return;
      if (kind === 't') return receiveSessionTurns(w);
      if (kind === 'a') return receiveAdapters(w);
      if (kind === 'f') return receiveInflight(from, w);
      return receiveTurns(kind, from, w);
    },
    onTurn(listener) {
      listeners.push(listener);
    },
    turns: {
      instance: o.instance,
      opened: (t) => send(`o|${o.instance}|${JSON.stringify([t.session, t.index, t.utterance, t.anchor, t.anchorIndex])}`),
      called: (c) => send(`c|${o.instance}|${JSON.stringify([c.session, c.index, c.owner, c.received, c.sent, c.firstToken, c.ended])}`),
      onOpened: (l) => { openedListeners.push(l); },
      onCalled: (l) => { calledListeners.push(l); },
      responded: (r) => send(`r|${o.instance}|${JSON.stringify([r.response, r.session])}`),
      onResponded: (l) => { respondedListeners.push(l); },
    },
    close() {
      closed = true;
      if (timer !== null) clearTimeout(timer);
      timer = null;
      pending.clear();
      pendingAdapters.clear();
    },
  };
}
