/** A session's pin: which replica serves it, since when, and how much of its prompt is warm there. */
export interface SessionInfo {
  readonly key: string;
  readonly replica: string;
  /** Wall ms when the session moved to this replica (the spill cooldown counts from here). */
  readonly since: number;
  readonly lastSeen: number;
  readonly warmTokens: number;
}

/**
 * Prefix of the store keys that pin keyless conversations (by placement key) rather than keyed
 * sessions: a NUL, which no header value holds. Not counted as pinned sessions, not handed off.
 */
export const CONVERSATION_KEY = '\u0000conv:';

export const isConversationKey = (key: string) => key.startsWith(CONVERSATION_KEY);

/** Requests for a LoRA adapter routed to a replica by one gateway: `count` of them, the last at `at` (wall ms). */
export interface AdapterSent {
  readonly replica: string;
  readonly adapter: string;
  readonly count: number;
  readonly at: number;
}

/** Another gateway's open requests per replica (replicas it has none on are absent), as it last told them. */
export interface PeerInflight {
  readonly instance: string;
  readonly counts: ReadonlyMap<string, number>;
}

/**
 * One turn of a session as every gateway's working set counts it: the replica serving it, its
 * agent (the chain link ending the prompt's shared part, routing/working-set.ts) and the tokens.
 */
export interface SessionTurn {
  /** Session key, or a keyless conversation's placement key (as the working set counts it). */
  readonly key: string;
  readonly replica: string;
  readonly agent: string | null;
  readonly agentTokens: number;
  readonly promptTokens: number;
  /** Wall ms of the turn. */
  readonly at: number;
  /** The key the session was counted under until this turn (a keyless conversation taking its own key). */
  readonly replaces?: string;
}

/** A caller turn opened on one gateway (record/turns.ts), told to the others. */
export interface TurnOpened {
  /** The turns' session id (`k:<session key>`, `p:<conversation key>`). */
  readonly session: string;
  readonly index: number;
  readonly utterance: string | null;
  readonly anchor: string | null;
  readonly anchorIndex: number;
  /** The gateway that opened it, and counts it. */
  readonly owner: string;
}

/** A call another gateway served of a turn this one owns; times in wall ms. */
export interface TurnCall {
  readonly session: string;
  readonly index: number;
  readonly owner: string;
  readonly received: number;
  readonly sent: number;
  readonly firstToken: number;
  readonly ended: number;
}

/** A Responses API response a gateway relayed whole, and the caller session it belongs to. */
export interface TurnResponse {
  readonly response: string;
  readonly session: string;
}

/** Caller turns shared between gateways: each turn is counted by the gateway that opened it. */
export interface TurnChannel {
  /** This gateway's id, as `owner` names it. */
  readonly instance: string;
  opened(turn: TurnOpened): void;
  called(call: TurnCall): void;
  /** Turns other gateways opened. */
  onOpened(listener: (turn: TurnOpened) => void): void;
  /** Calls other gateways served of turns this one owns. */
  onCalled(listener: (call: TurnCall) => void): void;
  /** A response id's session, for the gateway that gets the call naming it as `previous_response_id`. */
  responded(response: TurnResponse): void;
  /** Responses other gateways relayed. */
  onResponded(listener: (response: TurnResponse) => void): void;
}

export interface Fetched {
  readonly info: SessionInfo | null;
  readonly confirmed: boolean;
}

/**
 * Where session pins live. Reads are synchronous (a local view); a shared implementation keeps the
 * local view fresh in the background and writes through without making the request wait.
 */
export interface SessionStore {
  get(key: string, now: number): SessionInfo | null;
  /**
   * `since`: when the session came to this replica, if earlier than now and the key is new here
   * (a keyless conversation that takes its own key keeps the time it was placed). Default now.
   */
  pin(key: string, replica: string, warmTokens: number, now: number, since?: number): void;
  unpin(key: string): boolean;
  countsByReplica(now: number): Map<string, number>;
  /** Keys of the live pins on a replica (a drain moves each of them). */
  keysOn(replica: string, now: number): string[];
  /** Keys of every live pin, keyless conversations' included (the admin API's tag lookup). */
  keys?(now: number): string[];
  /** Drops this gateway's pins on a replica whose cache is gone; returns how many. */
  forgetReplica(replica: string): number;
  size(): number;
  close(): Promise<void>;
  /**
   * A shared store's answer for a key the local view lacks, waiting at most `timeoutMs` (for a
   * record only one replica can serve, where a wrong guess fails the request). `confirmed`: the
   * shared store answered (so a null `info` is a true miss). Absent for local-only stores.
   */
  fetch?(key: string, timeoutMs: number): Promise<Fetched>;
  /**
   * A shared store tells every other gateway of this turn (batched; `now` for a fresh placement,
   * sent at once). Absent for local-only stores: this gateway's own turns are all there is.
   */
  announce?(turn: SessionTurn, now: boolean): void;
  /** Turns other gateways announced, as they arrive. */
  onTurn?(listener: (turn: SessionTurn) => void): void;
  /**
   * A shared store tells every other gateway that requests for a LoRA adapter were routed to a
   * replica (batched; `now` for a placement, sent at once), so that every gateway's view of the
   * slots (routing/adapter-slots.ts) counts every gateway's requests. Absent for local-only stores.
   */
  announceAdapter?(sent: AdapterSent, now: boolean): void;
  /** Adapter requests other gateways announced, as they arrive. */
  onAdapterSent?(listener: (sent: AdapterSent) => void): void;
  /**
   * A shared store tells every other gateway how many requests this one has open on each replica
   * (sent at once: fleet/peer-inflight.ts paces it), so that every gateway's load bounds count
   * every gateway's requests. Absent for local-only stores.
   */
  announceInflight?(counts: ReadonlyMap<string, number>): void;
  /** Other gateways' open requests, each time one tells them. */
  onPeerInflight?(listener: (peer: PeerInflight) => void): void;
  /** Caller turns shared with the other gateways (record/turns.ts); absent for local-only stores. */
  readonly turns?: TurnChannel;
  /** Resolves once a shared store is connected; absent for local-only stores. */
  ready?(): Promise<void>;
}
