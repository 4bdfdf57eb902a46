import { isConversationKey, type SessionInfo, type SessionStore } from './types.js';

export interface MemoryStoreOptions {
  /** Most pins kept; the least recently used go first. */
  maxSessions: number;
  /** A pin unused for this long is forgotten (the replica's cache has likely evicted it too). */
  ttlMs: number;
}

export interface MemorySessionStore extends SessionStore {
  /** Keys of every live pin, conversations included (a shared store re-reads them after a gap). */
  keys(now: number): string[];
}

/** In-process session pins: a Map in LRU order (re-inserted on every touch) with a TTL. */
export function createMemorySessionStore(opts: MemoryStoreOptions): MemorySessionStore {
  const pins = new Map<string, SessionInfo>();

  const expired = (s: SessionInfo, now: number) => now - s.lastSeen > opts.ttlMs;

  return {
    get(key, now) {
      const s = pins.get(key);
      if (!s) return null;
      if (expired(s, now)) {
        pins.delete(key);
        return null;
      }
      return s;
    },
    pin(key, replica, warmTokens, now, since0) {
      const prev = pins.get(key);
      pins.delete(key);
      const since = prev && prev.replica === replica ? prev.since : prev === undefined && since0 !== undefined ? Math.min(since0, now) : now;
      pins.set(key, { key, replica, since, lastSeen: now, warmTokens });
      if (pins.size > opts.maxSessions) {
        const oldest = pins.keys().next().value;
        if (oldest !== undefined) pins.delete(oldest);
      }
    },
    unpin: (key) => pins.delete(key),
    countsByReplica(now) {
      const counts = new Map<string, number>();
      for (const s of pins.values()) {
        if (expired(s, now) || isConversationKey(s.key)) continue;
        counts.set(s.replica, (counts.get(s.replica) ?? 0) + 1);
      }
      return counts;
    },
    keysOn(replica, now) {
      const out: string[] = [];
      for (const s of pins.values()) if (s.replica === replica && !expired(s, now) && !isConversationKey(s.key)) out.push(s.key);
      return out;
    },
    keys(now) {
      const out: string[] = [];
      for (const s of pins.values()) if (!expired(s, now)) out.push(s.key);
      return out;
    },
    forgetReplica(replica) {
      let n = 0;
      for (const [k, s] of pins) if (s.replica === replica && pins.delete(k)) n++;
      return n;
    },
    size: () => pins.size,
    close: async () => {},
  };
}
