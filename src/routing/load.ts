import type { ReplicaView } from './types.js';

/**
 * Requests on the replica that a new one joins: the gateways' open requests (this one's, exact and
 * immediate, and the others' as they last told, a batch interval old), or the replica's reported
 * running + waiting when direct clients add to them. The scraped count is up to a second old,
 * hence the max.
 */
export function depthOf(r: ReplicaView): number {
  return Math.max(gatewaysInflight(r), r.running + r.waiting);
}

/** Requests being decoded beside a new one (the cost model's `running` feature). */
export function runningOf(r: ReplicaView): number {
  return Math.max(gatewaysInflight(r) - r.waiting, r.running, 0);
}

/** The open requests of every gateway sharing this one's store, its own included. */
function gatewaysInflight(r: ReplicaView): number {
  return r.inflight + (r.peerInflight ?? 0);
}

/** A replica's weight as a divisor: a weight of 0 or less counts as 1 rather than dividing by zero. */
export function weightOf(r: ReplicaView): number {
  return r.weight > 0 ? r.weight : 1;
}
