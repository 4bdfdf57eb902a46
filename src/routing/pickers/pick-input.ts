// What a picker decides from: the candidates as the strategy computed them, the load bounds, the
// session's home, and for a LoRA adapter's request what its placement reads of the slots. Its own
// module so that the pickers that read it (affinity.ts, adapter-placement.ts) do not import each other.
import type { AdapterPlaceView, ReplicaView } from '../types.js';
import type { Placement } from '../placement.js';
import type { LoadCaps } from './bounded-load.js';

/** What the picker knows of one candidate, computed by the strategy. */
export interface PickCandidate {
  readonly replica: ReplicaView;
  /** Cost model: estimated TTFT on this replica given its warm prefix and queue, ms. */
  readonly estimateMs: number;
  /** scoreMs × the weighted scorer total: how much the scorers favour this replica, ms. */
  readonly bonusMs: number;
  /** Prompt tokens believed warm here. */
  readonly matched: number;
}

export interface PickInput {
  readonly candidates: readonly PickCandidate[];
  readonly caps: LoadCaps;
  /** Per candidate: room under the bound on recent traffic (traffic.ts); new placements and spills honour it when any candidate has room. */
  readonly room: readonly boolean[];
  /** Index of the replica the session is bound to (its pin, else its prefix's holder); −1 for none. */
  readonly home: number;
  readonly homeReason: 'pinned' | 'prefix';
  /**
   * The session lost its replica: its pin names one that is no longer a candidate (down,
   * draining, gone), or its last response broke off there.
   */
  readonly pinLost: boolean;
  /** The session moved to `home` less than the cooldown ago: only the hard cap may move it again. */
  readonly coolingDown: boolean;
  /** Rendezvous key for a fresh placement (session key, else the first-turn placement key). */
  readonly placementKey: string | null;
  readonly tieMs: number;
  readonly random: () => number;
  /**
   * A fresh placement from the working sets (placement.ts: by capacity under KV pressure, else
   * for the sessions' growth), instead of the rendezvous of its key; absent (or index −1) when a
   * candidate's capacity is unknown and the caches hold every agent everywhere.
   */
  readonly byCapacity?: Placement | null;
  /**
   * Whether a cost spill may land on candidate i, asked only when one is about to happen. Under
   * KV pressure: only where the request's prompt fits the working set, or where the cache
   * overflows already; a replica whose working set fits keeps it warm (absent: anywhere).
   */
  readonly spillOk?: (i: number) => boolean;
  /**
   * A request for a LoRA adapter (routing/adapter-slots.ts): what a fresh placement reads of the
   * slots (`place`, adapter-placement.ts) and, per candidate, `wait` (1 where it would wait for a
   * slot). Absent for any other request.
   */
  readonly adapter?: { readonly place: AdapterPlacementInput | null; readonly wait: readonly number[] } | null;
}

/** What a new session of a LoRA adapter reads of the candidates' slots (adapter-slots.ts). */
export interface AdapterPlacementInput {
  /** Per candidate: its adapter's tier there, its slots, the adapter requests routed there lately. */
  readonly at: readonly AdapterPlaceView[];
  /** Its adapter's recent requests and every adapter's, fleet-wide (decayed alike). */
  readonly demand: { readonly mine: number; readonly all: number };
  /** routing.options.loadFactor: c of the load bounds. */
  readonly loadFactor: number;
}
