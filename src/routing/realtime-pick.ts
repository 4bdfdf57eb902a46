// Where a realtime transcription connection goes: a replica that is up, not draining, serves the
// model asked for and has room, its session's replica first (a pin, as chat sessions have), else
// the one carrying the fewest realtime connections now. A pure function of its arguments.

/** What the choice reads of a replica (fleet/registry.ts ReplicaState has it all). */
export interface RealtimeCandidate {
  readonly name: string;
  readonly up: boolean;
  readonly draining: boolean;
  /** Models it serves; null before its /v1/models was read (then it may serve any). */
  readonly models: ReadonlySet<string> | null;
}

/** Why a connection went where it went: a bounded metric label and a log field. */
export const REALTIME_ROUTES = ['pinned', 'least_connections', 'failover'] as const;
export type RealtimeRoute = (typeof REALTIME_ROUTES)[number];

export type RealtimeChoice =
  | { readonly ranked: readonly string[]; readonly reason: RealtimeRoute }
  /** none: no replica is up and not draining; model: none serves the model; full: all that could are at their limit. */
  | { readonly ranked: null; readonly why: 'none' | 'model' | 'full' };

export function pickRealtime(x: {
  readonly replicas: readonly RealtimeCandidate[];
  /** Realtime connections open on a replica now. */
  readonly open: (name: string) => number;
  /** The model the client named (`?model=`), or null. */
  readonly model: string | null;
  /** The replica the session's last connection went to, or null. */
  readonly pinned: string | null;
  /** realtime.maxConnectionsPerReplica; 0: no limit. */
  readonly maxPerReplica: number;
  /** Replicas that already failed this connection. */
  readonly exclude: ReadonlySet<string>;
  /** Rotates the order among replicas carrying the same count (so ties spread). */
  readonly turn: number;
}): RealtimeChoice {
  const live = x.replicas.filter((r) => r.up && !r.draining && !x.exclude.has(r.name));
  if (live.length === 0) return { ranked: null, why: 'none' };
  const serving = x.model === null ? live : live.filter((r) => r.models === null || r.models.has(x.model!));
  if (serving.length === 0) return { ranked: null, why: 'model' };
  const room = x.maxPerReplica === 0 ? serving : serving.filter((r) => x.open(r.name) < x.maxPerReplica);
  if (room.length === 0) return { ranked: null, why: 'full' };
  const n = room.length;
  const order = room.map((r, i) => ({ name: r.name, open: x.open(r.name), tie: (i - (x.turn % n) + n) % n }));
  order.sort((a, b) => a.open - b.open || a.tie - b.tie);
  const ranked = order.map((o) => o.name);
  const pin = x.pinned !== null ? ranked.indexOf(x.pinned) : -1;
  if (pin < 0) return { ranked, reason: x.exclude.size > 0 ? 'failover' : 'least_connections' };
  ranked.splice(pin, 1);
  ranked.unshift(x.pinned!);
  return { ranked, reason: x.exclude.size > 0 ? 'failover' : 'pinned' };
}
