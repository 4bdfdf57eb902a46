/**
 * When each keyless conversation (by placement key) last changed replica. A keyed session's pin
 * carries this (`since`); without it a keyless conversation could be moved by the cost model and
 * moved straight back on its next request, which the voice benchmark caught doing.
 */
export interface MoveLog {
  /** When the conversation moved to `replica`, if that is where it is. */
  since(key: string, replica: string): number | null;
  served(key: string, replica: string, now: number): void;
  forgetReplica(replica: string): void;
}

/** Bounded: past `max` conversations the least recently served are forgotten first. */
export function createMoveLog(max: number): MoveLog {
  const moves = new Map<string, { replica: string; since: number }>();
  return {
    since(key, replica) {
      const m = moves.get(key);
      return m !== undefined && m.replica === replica ? m.since : null;
    },
    served(key, replica, t) {
      const m = moves.get(key);
      moves.delete(key);
      moves.set(key, m !== undefined && m.replica === replica ? m : { replica, since: t });
      if (moves.size > max) moves.delete(moves.keys().next().value as string);
    },
    forgetReplica(replica) {
      for (const [k, m] of moves) if (m.replica === replica) moves.delete(k);
    },
  };
}
