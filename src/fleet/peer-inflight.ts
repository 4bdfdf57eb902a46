import type { PeerInflight, SessionStore } from '../store/types.js';

export interface PeerInflightOptions {
  readonly store: Required<Pick<SessionStore, 'announceInflight' | 'onPeerInflight'>>;
  /** This gateway's replicas and its own open requests on each (ReplicaState.inflight). */
  own(): Iterable<{ readonly name: string; readonly inflight: number }>;
  /** The other gateways' open requests on `replica` changed to `n` (a replica no longer in the fleet is ignored there). */
  apply(replica: string, n: number): void;
  now(): number;
  /** Runs `fn` after `ms` (a timer that does not hold the process; virtual time in the simulator). */
  later(fn: () => void, ms: number): void;
  /** How often this gateway's counts go out when they changed: the activity channel's batch interval. */
  readonly intervalMs: number;
}

/**
 * A gateway with counts still open says them again this often, unchanged or not, so that its
 * peers can tell it is alive: one whose last word is older than PEER_SILENT_MS is taken to be gone
 * and its counts are dropped (a pod killed mid-stream must not weigh on a replica for ever).
 */
export const INFLIGHT_KEEPALIVE_MS = 1_000;
export const PEER_SILENT_MS = 3 * INFLIGHT_KEEPALIVE_MS;

export interface PeerInflightShare {
  /** Peers heard from within PEER_SILENT_MS (for the admin view and the tests). */
  peers(): number;
  close(): void;
}

/**
 * Each gateway's open requests per replica, shared among the gateways of one store. A gateway's
 * own count is exact but its own only; the replica's scraped running + waiting counts everyone's
 * but is up to a scrape interval old (a second by default), and with N gateways a burst of new
 * sessions is placed by each as if the others sent nothing. Every `intervalMs` this gateway sends
 * its counts when they changed (and every INFLIGHT_KEEPALIVE_MS while any is open), whole, so a
 * lost message costs nothing past the next; what the others send is summed per replica into
 * ReplicaView.peerInflight, which the load bounds add to the gateway's own (routing/load.ts).
 */
export function sharePeerInflight(o: PeerInflightOptions): PeerInflightShare {
  const peers = new Map<string, { at: number; counts: ReadonlyMap<string, number> }>();
  // What was applied per replica, so that only changes are written and a replica whose peers went quiet is set back to 0.
  const applied = new Map<string, number>();
  let last = new Map<string, number>();
  let lastSentAt = -Infinity;
  let closed = false;

  function resum() {
    const sums = new Map<string, number>();
    for (const p of peers.values()) for (const [r, n] of p.counts) sums.set(r, (sums.get(r) ?? 0) + n);
    for (const [r, n] of applied) {
      if (sums.has(r)) continue;
      if (n !== 0) o.apply(r, 0);
      applied.delete(r);
    }
    for (const [r, n] of sums) {
      if (applied.get(r) === n) continue;
      applied.set(r, n);
      o.apply(r, n);
    }
  }

  function tick() {
    if (closed) return;
    const t = o.now();
    const counts = new Map<string, number>();
    for (const r of o.own()) if (r.inflight > 0) counts.set(r.name, r.inflight);
    let changed = counts.size !== last.size;
    if (!changed) for (const [r, n] of counts) if (last.get(r) !== n) { changed = true; break; }
    if (changed || (counts.size > 0 && t - lastSentAt >= INFLIGHT_KEEPALIVE_MS)) {
      o.store.announceInflight(counts);
      last = counts;
      lastSentAt = t;
    }
    let expired = false;
    for (const [id, p] of peers) if (t - p.at > PEER_SILENT_MS) { peers.delete(id); expired = true; }
    if (expired) resum();
    o.later(tick, o.intervalMs);
  }

  o.store.onPeerInflight((peer: PeerInflight) => {
    if (closed) return;
    peers.set(peer.instance, { at: o.now(), counts: peer.counts });
    resum();
  });
  o.later(tick, o.intervalMs);

  return {
    peers: () => peers.size,
    close() {
      closed = true;
      peers.clear();
      resum();
    },
  };
}
