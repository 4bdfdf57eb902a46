import type { ReplicaView } from './types.js';

/**
 * Requests on the replica that a new one joins: this gateway's own open requests, or the
 * replica's reported running + waiting when other gateways (or direct clients) add to it. The
 * gateway's count is exact and immediate; the scraped one is up to a second old, hence the max.
 */
export function depthOf(r: ReplicaView): number {
  return Math.max(r.inflight, r.running + r.waiting);
}

/** Requests being decoded beside a new one (the cost model's `running` feature). */
export function runningOf(r: ReplicaView): number {
  return Math.max(r.inflight - r.waiting, r.running, 0);
}

/** A replica's weight as a divisor: a weight of 0 or less counts as 1 rather than dividing by zero. */
export function weightOf(r: ReplicaView): number {
  return r.weight > 0 ? r.weight : 1;
}
