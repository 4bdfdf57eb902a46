import type { RoutingOptions } from '../config/schema.js';
import type { RequestIdentity } from '../identify/identity.js';
import { CONVERSATION_KEY, type SessionInfo, type SessionStore } from '../store/types.js';
import { adapterSlotsView, isAdapter, type AdapterRecency } from './adapter-slots.js';
import type { BrokenSessions } from './broken-sessions.js';
import type { PrefixIndex } from './prefix-index.js';
import type { PressureWatch } from './pressure.js';
import type { RouteContext } from './types.js';

const NOTHING_WARM: ReadonlyMap<string, number> = new Map();

/**
 * A keyless conversation's record: its own (conversation key), else — at its first turn under
 * that key — the record of its opening turn (placement key), shared by every caller who opened
 * with the same words: its replica holds this conversation's first turn warm whichever of them
 * it served (those turns were the same prompt), and its `since` is when that prompt came there.
 */
export function conversationOf(store: SessionStore, identity: RequestIdentity, t: number): { record: SessionInfo | null; opening: SessionInfo | null } {
  if (identity.sessionKey !== null || identity.conversationKey === null) return { record: null, opening: null };
  const own = store.get(CONVERSATION_KEY + identity.conversationKey, t);
  if (own !== null || identity.placementKey === null || identity.placementKey === identity.conversationKey) return { record: own, opening: null };
  const opening = store.get(CONVERSATION_KEY + identity.placementKey, t);
  return { record: opening, opening };
}

export interface ContextDeps {
  readonly store: SessionStore;
  readonly index: PrefixIndex;
  readonly broken: BrokenSessions;
  readonly pressure: PressureWatch;
  readonly options: () => RoutingOptions;
  /** Each replica's KV capacity as last seen, for the warmup's question (the router's homeSet). */
  readonly capacities: Map<string, number>;
  /** When the capacities were last read from the replicas (capacityReading). */
  readonly capacityRead: CapacityReading;
  /** The adapters this gateway sent to each replica, and when (adapter-slots.ts). */
  readonly adapters: AdapterRecency;
}

/**
 * KV capacities change when a replica is scraped (once a second by default), not per request:
 * they are read again when the replica list changes, or a second after the last reading, so a
 * decision does not visit every replica for them.
 */
export const CAPACITY_REREAD_MS = 1000;

export interface CapacityReading {
  replicas: RouteContext['replicas'] | null;
  count: number;
  at: number;
}

export function capacityReading(): CapacityReading {
  return { replicas: null, count: 0, at: -Infinity };
}

/**
 * What a decision reads, looked up once into a RouteContext: the session's pin, the warm prefix
 * per replica (prefix index, and the pin's or the conversation's own record, which may come from
 * another gateway), whether its last response broke off, and the pressure question.
 */
export function buildContext(d: ContextDeps, identity: RequestIdentity, replicas: RouteContext['replicas'], t: number, learns: boolean, loadable?: RouteContext['loadable']): RouteContext {
  const o = d.options();
  const pin = identity.sessionKey === null ? null : d.store.get(identity.sessionKey, t);
  if (!learns) return { identity, replicas, now: t, pin, warm: NOTHING_WARM, avoid: null, loadable };
  // Capacity is in the replica's tokens, the index counts estimated ones: close enough for a
  // bound whose job is to forget the oldest links once a replica has surely evicted them.
  const read = d.capacityRead;
  if (read.replicas !== replicas || read.count !== replicas.length || t - read.at >= CAPACITY_REREAD_MS || t < read.at) {
    read.replicas = replicas;
    read.count = replicas.length;
    read.at = t;
    for (const r of replicas) {
      d.index.setCapacity(r.name, r.kvCapacityTokens);
      if (r.kvCapacityTokens !== null && r.kvCapacityTokens > 0) d.capacities.set(r.name, r.kvCapacityTokens);
    }
  }
  const warm = identity.chain.length > 0 ? d.index.match(identity.chain, identity.chainTokens, t) : new Map<string, number>();
  // A pin may come from another gateway through a shared store, unknown to this index: its
  // recorded warm prefix counts while the replica would still hold it.
  if (pin !== null && t - pin.lastSeen <= o.prefixTtlMs) {
    const w = Math.min(pin.warmTokens, identity.promptTokens);
    if (w > (warm.get(pin.replica) ?? 0)) warm.set(pin.replica, w);
  }
  const conversation = conversationOf(d.store, identity, t).record;
  // Its warm prefix there counts too, as a pin's does. The pin is only rewritten when the
  // conversation moves, so its recorded prefix is that of the turn that placed it; the replica
  // that served the last turn holds that turn's prompt: all but the answer and the new message.
  if (conversation !== null && t - conversation.lastSeen <= o.prefixTtlMs) {
    const ct = identity.chainTokens;
    const previous = ct.length >= 3 ? ct[ct.length - 3] : 0;
    const w = Math.min(Math.max(conversation.warmTokens, previous), identity.promptTokens);
    if (w > (warm.get(conversation.replica) ?? 0)) warm.set(conversation.replica, w);
  }
  const adapters = identity.model !== null && (loadable !== undefined || isAdapter(identity.model, replicas)) ? adapterSlotsView(identity.model, d.adapters, t, o.adapterBusyMs, o.workingSetWindowMs, loadable !== undefined) : undefined;
  return {
    identity, replicas, now: t, pin, warm, avoid: d.broken.avoid(identity.sessionKey ?? identity.conversationKey, t), conversation,
    pressured: d.pressure.forDecision(identity, t),
    adapters,
    loadable,
  };
}
