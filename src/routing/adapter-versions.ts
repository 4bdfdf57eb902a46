import { hash64 } from '../identify/hash.js';
import type { SessionStore } from '../store/types.js';

const TWO_POW_53 = 2 ** 53;

/** How a request's version was chosen: kept from its session's first request, new for a session, or split by weight (no session key). */
export type VersionSource = 'session' | 'new' | 'split';

export interface VersionChoice {
  readonly version: string;
  readonly source: VersionSource;
}

/**
 * Rolling adapter versions out per call (adapters.versions): a client model name maps to weighted
 * adapter versions. A session (its key) is given one at its first request and keeps it for every
 * turn, through the shared store like a pin, so every gateway serves it the same version; a weight
 * changed by a reload applies to new sessions only. A request without a session key is split by
 * weight: by its conversation's placement key when it has one (a keyless conversation keeps its
 * version too), else at random.
 */
export interface AdapterVersions {
  /** Whether `model` is a client model name with versions. */
  has(model: string | null): model is string;
  /**
   * With a shared store, a keyed session this gateway has no record of: a bounded read of the
   * store first (null when there is nothing to wait for: the common case).
   */
  prefetch(model: string, sessionKey: string | null): Promise<void> | null;
  /** The version for this request (synchronous: the store's local view). */
  choose(model: string, sessionKey: string | null, placementKey: string | null, now: number): VersionChoice;
  /** The client model names and their versions (for /v1/models). */
  names(): ReadonlyMap<string, readonly string[]>;
  setVersions(versions: Readonly<Record<string, Readonly<Record<string, number>>>>): void;
}

/** The store key of a session's version of one client model (a session may call several). */
const keyOf = (model: string, sessionKey: string) => `${model}\u0000${sessionKey}`;

/**
 * Weighted rendezvous: each version scores w / −ln(u), u uniform from xxhash64(key, version); the
 * highest wins. Every gateway makes the same choice for a key, and a weight change moves only the
 * keys it must.
 */
export function weightedChoice(key: string, versions: Readonly<Record<string, number>>): string {
  const k = hash64(key);
  let best = '';
  let top = -1;
  for (const [v, w] of Object.entries(versions)) {
    if (w <= 0) continue;
    const u = (Number(hash64(v, k) >> 11n) + 0.5) / TWO_POW_53;
    const s = w / -Math.log(u);
    if (s > top) { top = s; best = v; }
  }
  return best;
}

function randomChoice(versions: Readonly<Record<string, number>>, random: () => number): string {
  const entries = Object.entries(versions).filter(([, w]) => w > 0);
  let total = 0;
  for (const [, w] of entries) total += w;
  let x = random() * total;
  for (const [v, w] of entries) {
    if ((x -= w) < 0) return v;
  }
  return entries[entries.length - 1][0];
}

// A session's record is written again (its TTL renewed) at most this often.
const REFRESH_MS = 60_000;

export function createAdapterVersions(deps: {
  /** Session key → version records (memory, or Redis shared by every gateway). */
  readonly store: SessionStore;
  readonly versions: Readonly<Record<string, Readonly<Record<string, number>>>>;
  /** Longest wait for the shared store on a local miss. */
  readonly fetchMs: number;
  readonly random?: () => number;
}): AdapterVersions {
  const { store } = deps;
  const random = deps.random ?? Math.random;
  let versions = deps.versions;
  let names = new Map<string, string[]>();
  const setVersions = (v: typeof versions) => {
    versions = v;
    names = new Map(Object.entries(v).map(([name, vs]) => [name, Object.keys(vs)]));
  };
  setVersions(versions);
  return {
    has: (model): model is string => model !== null && Object.hasOwn(versions, model),
    prefetch(model, sessionKey) {
      if (sessionKey === null || store.fetch === undefined) return null;
      const k = keyOf(model, sessionKey);
      if (store.get(k, Date.now()) !== null) return null;
      return store.fetch(k, deps.fetchMs).then(() => undefined);
    },
    choose(model, sessionKey, placementKey, now) {
      const weights = versions[model];
      if (sessionKey === null) {
        return { version: placementKey !== null ? weightedChoice(placementKey, weights) : randomChoice(weights, random), source: 'split' };
      }
      const k = keyOf(model, sessionKey);
      const had = store.get(k, now);
      // Kept while its version is still configured (at any weight, 0 included); a version removed
      // from the configuration gives its sessions a new one.
      if (had !== null && Object.hasOwn(weights, had.replica)) {
        if (now - had.lastSeen > REFRESH_MS) store.pin(k, had.replica, 0, now);
        return { version: had.replica, source: 'session' };
      }
      const version = weightedChoice(sessionKey, weights);
      store.pin(k, version, 0, now);
      return { version, source: 'new' };
    },
    names: () => names,
    setVersions,
  };
}
