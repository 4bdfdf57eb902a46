import type { RequestIdentity } from '../identify/identity.js';

/**
 * Where a session's prompt stopped extending its previous turn's: in what the template renders
 * before the messages (tools, response_format, chat template: the chain's seed), in the system
 * prompt (a message before the first user turn), or in the history (a user, assistant or tool
 * message). Bounded: a metric label.
 */
export type DriftWhere = 'tools' | 'system' | 'history';

export interface Drift {
  readonly where: DriftWhere;
  /** Index of the first message that differs (0 with `tools`: the seed changes every link). */
  readonly message: number;
  /** Wall ms. */
  readonly at: number;
}

/** What is remembered of a session's last turn: its links, and its seed, to tell tools from message 0. */
interface LastTurn {
  readonly chain: readonly string[];
  readonly seed: string;
  drift: Drift | null;
}

export interface DriftWatch {
  /**
   * Compares this turn with the session's last one; returns the drift when this turn's prompt no
   * longer starts with the last turn's whole prompt. `key` is the session key (or a keyless
   * conversation's placement key).
   */
  observe(key: string, id: RequestIdentity, now: number): Drift | null;
  /** The last drift seen for a session, if any. */
  last(key: string): Drift | null;
}

/**
 * The prompt-drift detector. The most common reason a voice session's cache misses is not routing
 * but the agent changing bytes early in its own prompt (a timestamp in the system prompt, tools
 * reordered, a schema re-serialised): turn n then no longer extends turn n−1, and vLLM prefills
 * everything after the first changed byte again. The chains are compared link by link, so the
 * first changed message is known exactly; only hashes are kept, never text. Bounded in sessions and
 * in links kept over all of them (a chain has one per message, up to limits.maxMessages): the
 * least recently seen sessions are forgotten first.
 */
export function createDriftWatch(maxSessions: number, maxLinks: number): DriftWatch {
  const turns = new Map<string, LastTurn>();
  let links = 0;
  const forget = (key: string) => {
    const t = turns.get(key);
    if (t === undefined) return;
    links -= t.chain.length;
    turns.delete(key);
  };
  return {
    observe(key, id, now) {
      if (id.chain.length === 0) return null;
      const prev = turns.get(key);
      forget(key);
      const next: LastTurn = { chain: id.chain, seed: id.seed, drift: prev?.drift ?? null };
      turns.set(key, next);
      links += id.chain.length;
      // The session just seen always stays, however long its chain.
      while (turns.size > 1 && (turns.size > maxSessions || links > maxLinks)) forget(turns.keys().next().value as string);
      if (prev === undefined) return null;
      const n = Math.min(prev.chain.length, id.chain.length);
      let first = -1;
      for (let i = 0; i < n; i++) {
        if (prev.chain[i] !== id.chain[i]) { first = i; break; }
      }
      // The same prompt again (a retry), or one that extends the last: no drift. A shorter one whose
      // links all match (history trimmed from the end) differs from the first link it lacks.
      if (first < 0 && id.chain.length >= prev.chain.length) return null;
      if (first < 0) first = n;
      const where: DriftWhere = prev.seed !== id.seed ? 'tools' : first < id.firstUser || id.firstUser < 0 ? 'system' : 'history';
      next.drift = { where, message: where === 'tools' ? 0 : first, at: now };
      return next.drift;
    },
    last: (key) => turns.get(key)?.drift ?? null,
  };
}
