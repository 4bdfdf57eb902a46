/**
 * Sessions whose last response broke off after its first byte, and on which replica. Their next
 * request is placed elsewhere as a failover (filters/not-failed.ts) instead of going back to
 * the replica that just failed them; the entry goes once the session is served whole.
 */
export interface BrokenSessions {
  /** The replica to avoid for this session (session key, else placement key), if any. */
  avoid(key: string | null, now: number): string | null;
  broke(key: string | null, replica: string, now: number): void;
  healed(key: string | null): void;
}

/** Bounded by count (oldest first) and by age. */
export function createBrokenSessions(max: number, ttlMs: number): BrokenSessions {
  const broken = new Map<string, { replica: string; at: number }>();
  return {
    avoid(key, now) {
      if (key === null || broken.size === 0) return null;
      const b = broken.get(key);
      if (b === undefined) return null;
      if (now - b.at > ttlMs) {
        broken.delete(key);
        return null;
      }
      return b.replica;
    },
    broke(key, replica, now) {
      if (key === null) return;
      broken.delete(key);
      broken.set(key, { replica, at: now });
      if (broken.size > max) broken.delete(broken.keys().next().value as string);
    },
    healed(key) {
      if (key !== null && broken.size > 0) broken.delete(key);
    },
  };
}
