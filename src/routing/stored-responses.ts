import type { SessionInfo, SessionStore } from '../store/types.js';
import type { ReplicaView, StateLostReason } from './types.js';

/**
 * Where a stored response is, as routing sees it: its holder (up and taking new requests), or why
 * the request cannot go there.
 */
export type Located =
  | { readonly holder: ReplicaView; readonly warmTokens: number }
  | { readonly holder: null; readonly lost: StateLostReason; readonly replica: string | null };

/**
 * Which replica stores each response the gateway relayed (the Responses API's `store`). vLLM keeps
 * stored responses in the memory of the replica that produced them, so a request that names one
 * (`previous_response_id`, /v1/responses/{id}) only works there: stickiness here is correctness.
 *
 * The records are a SessionStore of their own (response id → replica), bounded and TTL'd like the
 * pins, and shared between gateways the same way when Redis is configured (under its own key
 * prefix): reads are local, a new record is written and published.
 */
export interface StoredResponses {
  locate(id: string, replicas: readonly ReplicaView[], now: number): Located;
  /** A response `id` was served whole by `replica`, which now stores it. */
  served(id: string, replica: string, warmTokens: number, now: number): void;
  /** `replica` is a new process since `since` (wall ms): what it stored before then is gone. */
  restarted(replica: string, since: number): void;
  /** `replica` left the fleet: its records already read as removed. */
  left(replica: string): void;
  get(id: string, now: number): SessionInfo | null;
  /** No local record of `id`: read the shared store, at most `timeoutMs`. null: nothing to read (a local record, or no shared store). Resolves to whether the store answered. */
  fetch(id: string, now: number, timeoutMs: number): Promise<boolean> | null;
  size(): number;
}

export function createStoredResponses(store: SessionStore): StoredResponses {
  // Per replica (so bounded by the fleet): when its current process started, once a restart was
  // seen. The records stay where they are (in Redis they are shared, and other gateways see the
  // restart on their own scrape); each is judged by when it was stored.
  const newProcessSince = new Map<string, number>();
  return {
    locate(id, replicas, now) {
      const rec = store.get(id, now);
      if (rec === null) return { holder: null, lost: 'unknown', replica: null };
      const r = replicas.find((x) => x.name === rec.replica);
      if (r === undefined) return { holder: null, lost: 'removed', replica: rec.replica };
      if (rec.since < (newProcessSince.get(rec.replica) ?? -Infinity)) return { holder: null, lost: 'restarted', replica: rec.replica };
      if (!r.up) return { holder: null, lost: 'down', replica: rec.replica };
      if (r.draining) return { holder: null, lost: 'draining', replica: rec.replica };
      return { holder: r, warmTokens: rec.warmTokens };
    },
    served: (id, replica, warmTokens, now) => store.pin(id, replica, warmTokens, now),
    restarted(replica, since) {
      newProcessSince.set(replica, Math.max(since, newProcessSince.get(replica) ?? -Infinity));
    },
    left: (replica) => { newProcessSince.delete(replica); },
    get: (id, now) => store.get(id, now),
    fetch(id, now, timeoutMs) {
      if (store.fetch === undefined || store.get(id, now) !== null) return null;
      return store.fetch(id, timeoutMs).then((f) => f.confirmed);
    },
    size: () => store.size(),
  };
}
