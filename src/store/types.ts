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
  /** Resolves once a shared store is connected; absent for local-only stores. */
  ready?(): Promise<void>;
}
