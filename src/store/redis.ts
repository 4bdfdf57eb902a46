import { randomBytes } from 'node:crypto';
import type { Cluster, Redis, RedisOptions } from 'ioredis';
import type { Logger } from 'pino';
import type { Metrics } from '../telemetry/metrics.js';
import { createMemorySessionStore } from './memory.js';
import { ACTIVITY_FLUSH_MS, createSessionActivity } from './redis-activity.js';
import { redisTarget } from './redis-connect.js';
import { newerPin, PLACE, REFRESH, splitN } from './redis-scripts.js';
import type { Fetched, SessionStore } from './types.js';

/** Which of the gateway's two stores (a metric label). */
export type StoreName = 'sessions' | 'responses' | 'versions';

export interface RedisStoreOptions {
  url: string;
  /** Default `sessions`. */
  store?: StoreName;
  keyPrefix: string;
  maxSessions: number;
  ttlMs: number;
  metrics: Metrics;
  log: Logger;
  /** The router's clock (wall time: `since` travels between gateways). */
  now?: () => number;
  /** Background lookups of local misses in flight at once; misses beyond it are not looked up. */
  maxLookups?: number;
  /** Writes awaiting Redis at once; beyond it (a stalled Redis) writes are dropped and resynced later. */
  maxPendingWrites?: number;
  /** Longest wait between reconnect attempts. */
  maxReconnectDelayMs?: number;
  /** Longest a session's turn waits to be told to the other gateways (one PUBLISH per interval). Default 100. */
  activityFlushMs?: number;
}

export interface RedisSessionStore extends SessionStore {
  /** Resolves once both connections are up; routing never needs to wait for it. */
  ready(): Promise<void>;
}

export const STORE_OPS = ['connect', 'subscribe', 'pin', 'refresh', 'unpin', 'lookup', 'resync', 'gap_resync', 'fetch', 'drain', 'announce'] as const;
export const STORE_EVENTS = ['published', 'refreshed', 'applied', 'filled', 'lookup_dropped', 'resynced', 'lost', 'refresh_moved', 'gap_resyncs', 'gap_corrected', 'fetched', 'fetch_missed', 'turns_announced', 'adapter_requests_announced', 'adapter_requests_heard', 'inflight_announced', 'inflight_heard', 'activity_malformed'] as const;
type Op = (typeof STORE_OPS)[number];
type Event = (typeof STORE_EVENTS)[number];
type Conn = 'main' | 'sub';

type Client = (Redis | Cluster) & {
  wrPlace(key: string, value: string, since: string, replica: string, ttl: string, mode: string, channel: string, message: string): Promise<string | null>;
  wrRefresh(key: string, replica: string, ttl: string): Promise<number | string>;
};

/** Keys re-read at once after a subscriber gap (a bound on the GETs in flight). */
const GAP_BATCH = 100;

/**
 * Session pins shared between gateways through Redis, read from a local view.
 *
 * Placement is deterministic (rendezvous), so gateways already agree on every session that has not
 * moved; only moves (spill, failover, a new pin) need sharing. A move is written
 * (`<prefix>sess:<key>` = `replica|since|warmTokens`, PX ttl; `sess:{<key>}` on a Cluster) and
 * published on `<prefix>pins` by one Lua script (PLACE) that also settles conflicts: a new
 * session is SET NX, a move wins only if it is newer; the loser follows the winner. Every other
 * gateway applies a published move to its view at once; one whose subscriber was away reads its
 * pins back when it returns (the moves published meanwhile are lost to it). A turn on an unmoved
 * pin costs at most one refresh per ttl/4, which extends the TTL only if Redis still holds this
 * placement and otherwise follows the newer one. A local miss answers null at once (the router
 * places by rendezvous, as any gateway would) and looks the key up in the background for the next
 * turn; `fetch` is the one bounded wait, for a record that only one replica can serve. Nothing
 * else awaits Redis on the request path or throws into the router; while Redis is away the local
 * view routes, errors are counted, and the moves it missed are written when it returns.
 */
export function createRedisSessionStore(opts: RedisStoreOptions): RedisSessionStore {
  const { metrics, log, keyPrefix, ttlMs } = opts;
  const store = opts.store ?? 'sessions';
  const now = opts.now ?? Date.now;
  const local = createMemorySessionStore({ maxSessions: opts.maxSessions, ttlMs });
  const instance = randomBytes(6).toString('base64url');
  const channel = `${keyPrefix}pins`;
  const activityChannel = `${keyPrefix}activity`;
  const target = redisTarget(opts.url);
  // Cluster: the session key is a hash tag, so every key of one session lands in one slot.
  const redisKey = target.mode === 'cluster' ? (key: string) => `${keyPrefix}sess:{${key}}` : (key: string) => `${keyPrefix}sess:${key}`;
  const refreshEvery = Math.max(1, Math.floor(ttlMs / 4));
  const maxLookups = opts.maxLookups ?? 64;
  const maxPending = opts.maxPendingWrites ?? 1024;
  const maxDelay = opts.maxReconnectDelayMs ?? 2_000;

  const base: RedisOptions = {
    lazyConnect: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2_000,
    retryStrategy: (times) => Math.min(50 * 2 ** Math.min(times, 10), maxDelay),
  };
  // No offline queue: a write Redis cannot take now is counted and remembered, never buffered.
  const main = target.connect({ ...base, enableOfflineQueue: false, commandTimeout: 2_000 }) as Client;
  main.defineCommand('wrPlace', { numberOfKeys: 1, lua: PLACE });
  main.defineCommand('wrRefresh', { numberOfKeys: 1, lua: REFRESH });
  // The subscriber only ever sends SUBSCRIBE, so holding that until connected (however long) is
  // bounded; ioredis re-subscribes by itself after each reconnect.
  const sub = target.connect({ ...base, enableOfflineQueue: true, maxRetriesPerRequest: null });
  metrics.storeUp.set({ store }, 0);

  // Every series exists from the start, so rate() alerts work before the first error.
  for (const op of STORE_OPS) metrics.storeErrors.inc({ store, op }, 0);
  for (const event of STORE_EVENTS) metrics.storeEvents.inc({ store, event }, 0);

  let closed = false;
  let connected = false;
  const down: Record<Conn, boolean> = { main: false, sub: false };
  const count = (event: Event) => metrics.storeEvents.inc({ store, event });

  // Warn once when a connection starts failing, info once when it is back: not a line per error.
  function failed(conn: Conn, op: Op, err: unknown) {
    if (closed) return;
    metrics.storeErrors.inc({ store, op });
    if (down[conn]) return;
    down[conn] = true;
    log.warn({ conn, op, err: (err as Error)?.message ?? String(err), keyPrefix }, 'redis session store unreachable: routing from the local view, moves will be written when it returns');
  }
  function recovered(conn: Conn) {
    if (!down[conn]) return;
    down[conn] = false;
    log.info({ conn, keyPrefix }, 'redis session store reachable again');
  }

  // Keys whose last move or unpin did not reach Redis, in age order, as many as the view holds.
  const dirty = new Map<string, 'pin' | 'unpin'>();
  function markDirty(key: string, what: 'pin' | 'unpin') {
    dirty.delete(key);
    dirty.set(key, what);
    if (dirty.size > opts.maxSessions) dirty.delete(dirty.keys().next().value as string);
  }

  let pending = 0;
  function send<T>(op: Op, run: () => Promise<T>, ok: (v: T) => void, onFail?: () => void) {
    if (main.status !== 'ready' || pending >= maxPending) {
      failed('main', op, main.status !== 'ready' ? `connection ${main.status}` : 'too many writes pending');
      onFail?.();
      return;
    }
    pending++;
    run().then(
      (v) => { pending--; recovered('main'); ok(v); resync(); },
      (e) => { pending--; failed('main', op, e); onFail?.(); },
    );
  }

  /**
   * Writes the moves Redis missed, as many as the pending-write bound allows; the rest go as those
   * complete. Driven by successes only, so a Redis that fails every write is not retried in a loop.
   */
  function resync() {
    while (dirty.size > 0 && main.status === 'ready' && pending < maxPending) {
      const [key, what] = dirty.entries().next().value as [string, 'pin' | 'unpin'];
      dirty.delete(key);
      publishState(key, what, 'resync');
    }
  }

  /**
   * Writes the key's current local state (its pin, or its absence) and tells the other gateways.
   * A pin is placed atomically (PLACE): a new session with SET NX, a move only if it is the newer
   * one. A gateway that loses follows the winner from the session's next turn, and publishes nothing.
   */
  function publishState(key: string, what: 'pin' | 'unpin', op: Op, mode: 'new' | 'move' = 'move') {
    const s = what === 'pin' ? local.get(key, now()) : null;
    if (what === 'pin' && s === null) return; // evicted meanwhile: nothing worth sharing
    if (s === null) {
      send(op, async () => {
        await main.del(redisKey(key));
        await main.publish(channel, `u|${instance}|${key}`);
      }, () => count(op === 'resync' ? 'resynced' : 'published'), () => markDirty(key, what));
      return;
    }
    send(op, () => main.wrPlace(redisKey(key), `${s.replica}|${s.since}|${s.warmTokens}`, String(s.since), s.replica, String(ttlMs), mode,
      channel, `p|${instance}|${s.replica}|${s.since}|${s.warmTokens}|${key}`), (winner) => {
      if (winner === null) return count(op === 'resync' ? 'resynced' : 'published');
      const f = splitN(winner, 2);
      if (f !== null) follow(key, f[0], Number(f[1]), Number(f[2]) || 0);
    }, () => markDirty(key, what));
  }

  // Replicas this gateway saw lose their cache (restart, long outage), and when: a pin read back
  // from Redis that predates it keeps its placement, but nothing of it is warm there any more.
  const forgotten = new Map<string, number>();
  const warmSince = (replica: string, since: number, warm: number) => ((forgotten.get(replica) ?? -Infinity) >= since ? 0 : warm);

  /** Another gateway placed or moved the session first: this one follows it. */
  function follow(key: string, replica: string, since: number, warm: number) {
    if (!Number.isFinite(since)) return;
    const t = now();
    const w = warmSince(replica, since, warm);
    local.pin(key, replica, w, Math.min(since, t));
    local.pin(key, replica, w, t);
    count('lost');
  }

  /** Redis holds another placement than this gateway's view: the newer one wins, as in PLACE. */
  function reconcile(key: string, held: string): boolean {
    const f = splitN(held, 2);
    const mine = local.get(key, now());
    if (f === null || mine === null) return false;
    const theirs = { replica: f[0], since: Number(f[1]) };
    if (theirs.replica === mine.replica) return false;
    if (newerPin(theirs, mine)) return apply(key, f[0], f[1], f[2]);
    publishState(key, 'pin', 'resync');
    return false;
  }

  // Compares before it refreshes: a move this gateway missed (a pub/sub gap) shows here, at the
  // latest a quarter TTL into the session's use.
  function refresh(key: string) {
    const s = local.get(key, now());
    if (s === null) return;
    send('refresh', () => main.wrRefresh(redisKey(key), s.replica, String(ttlMs)), (r) => {
      // Gone from Redis (it restarted empty, or evicted it): write it again.
      if (r === 0) publishState(key, 'pin', 'resync');
      else if (r === 1) count('refreshed');
      else if (reconcile(key, String(r))) count('refresh_moved');
    });
  }

  /**
   * After the subscriber was away, the moves published meanwhile never arrive: every pin in the
   * view is read back (GAP_BATCH at a time) and the newer placement wins, either way.
   */
  let gapRun: Promise<void> | null = null;
  let gapAgain = false;
  function resyncAfterGap() {
    if (gapRun !== null) { gapAgain = true; return; }
    count('gap_resyncs');
    gapRun = (async () => {
      const keys = local.keys(now());
      let corrected = 0;
      for (let i = 0; i < keys.length && !closed; i += GAP_BATCH) {
        const batch = keys.slice(i, i + GAP_BATCH);
        const held = await Promise.all(batch.map((k) => main.get(redisKey(k)).catch((e: unknown) => { failed('main', 'gap_resync', e); return undefined; })));
        for (let j = 0; j < batch.length; j++) {
          const v = held[j];
          if (v === undefined) continue;
          if (v === null) { if (local.get(batch[j], now()) !== null) publishState(batch[j], 'pin', 'resync'); continue; }
          if (reconcile(batch[j], v)) { corrected++; count('gap_corrected'); }
        }
      }
      if (corrected > 0) log.warn({ keyPrefix, sessions: keys.length, corrected }, 'redis pub/sub gap: pins moved meanwhile by other gateways applied');
    })().finally(() => {
      gapRun = null;
      if (gapAgain && !closed) { gapAgain = false; resyncAfterGap(); }
    });
  }

  /** Another gateway's pin, as read off the wire; the newer move wins when two crossed. */
  function apply(key: string, replica: string, sinceText: string, warmText: string): boolean {
    const since = Number(sinceText);
    const warm = Number(warmText) || 0;
    if (!Number.isFinite(since)) return false;
    const t = now();
    const cur = local.get(key, t);
    if (cur !== null && (cur.replica === replica || newerPin(cur, { since, replica }))) return false;
    // Pinned twice: the first sets `since` to when the move happened (the spill cooldown counts from
    // there, not from when this gateway heard of it), the second marks it used now.
    const w = warmSince(replica, since, warm);
    local.pin(key, replica, w, Math.min(since, t));
    local.pin(key, replica, w, t);
    count('applied');
    return true;
  }

  const lookups = new Set<string>();
  function lookup(key: string) {
    if (lookups.has(key) || closed) return;
    if (lookups.size >= maxLookups) return count('lookup_dropped');
    lookups.add(key);
    const done = () => lookups.delete(key);
    send('lookup', () => main.get(redisKey(key)), (v) => {
      done();
      // A pin this gateway made while the lookup was out is newer than what the lookup read.
      const f = v === null || local.get(key, now()) !== null ? null : splitN(v, 2);
      if (f !== null && apply(key, f[0], f[1], f[2])) count('filled');
    }, done);
  }

  // Only the sessions store announces turns (the responses store's records have no working set).
  const activity = store === 'sessions' ? createSessionActivity({
    instance, now, flushMs: opts.activityFlushMs ?? ACTIVITY_FLUSH_MS, maxPending: opts.maxSessions,
    publish: (m) => (main.status === 'ready' ? main.publish(activityChannel, m) : Promise.reject(new Error(`connection ${main.status}`))),
    failed: (e) => failed('main', 'announce', e),
    sent: (n) => metrics.storeEvents.inc({ store, event: 'turns_announced' }, n),
    sentAdapters: (n) => metrics.storeEvents.inc({ store, event: 'adapter_requests_announced' }, n),
    heardAdapters: (n) => metrics.storeEvents.inc({ store, event: 'adapter_requests_heard' }, n),
    sentInflight: () => metrics.storeEvents.inc({ store, event: 'inflight_announced' }),
    heardInflight: () => metrics.storeEvents.inc({ store, event: 'inflight_heard' }),
    malformed: () => count('activity_malformed'),
  }) : null;

  sub.on('message', (ch: string, msg: string) => {
    if (ch === activityChannel) return activity?.receive(msg);
    if (msg.startsWith('p|')) {
      const f = splitN(msg, 5);
      if (f !== null && f[1] !== instance) apply(f[5], f[2], f[3], f[4]);
    } else if (msg.startsWith('u|')) {
      const f = splitN(msg, 2);
      if (f !== null && f[1] !== instance && local.unpin(f[2])) count('applied');
    }
  });
  const channels = activity === null ? [channel] : [channel, activityChannel];
  const subscribed = sub.subscribe(...channels).catch((e: unknown) => failed('sub', 'subscribe', e));

  main.on('error', (e: unknown) => failed('main', 'connect', e));
  main.on('close', () => { if (!closed) metrics.storeUp.set({ store }, 0); });
  sub.on('error', (e: unknown) => failed('sub', 'subscribe', e));
  // ioredis re-subscribes by itself on reconnect; subscribing again (idempotent) tells when that
  // holds, and only then is the view read back: a move published from then on arrives as usual.
  let subSeen = false;
  let subGap = false;
  sub.on('close', () => { if (subSeen) subGap = true; });
  sub.on('ready', () => {
    recovered('sub');
    if (!subSeen) { subSeen = true; return; }
    if (!subGap) return;
    subGap = false;
    sub.subscribe(...channels).then(() => { if (main.status === 'ready') resyncAfterGap(); else gapAgain = true; }, (e: unknown) => failed('sub', 'subscribe', e));
  });
  main.on('ready', () => {
    metrics.storeUp.set({ store }, 1);
    if (!connected) log.info({ keyPrefix, mode: target.mode }, 'redis session store connected');
    connected = true;
    recovered('main');
    // Moves made while Redis was away: write them now so other gateways and later lookups see them.
    resync();
    if (gapAgain && gapRun === null) { gapAgain = false; resyncAfterGap(); }
  });

  const whenReady = (c: Redis | Cluster) => (c.status === 'ready' ? Promise.resolve() : new Promise<void>((r) => c.once('ready', () => r())));

  return {
    get(key, t) {
      const s = local.get(key, t);
      if (s === null) lookup(key);
      return s;
    },
    pin(key, replica, warmTokens, t, since) {
      const prev = local.get(key, t);
      local.pin(key, replica, warmTokens, t, since);
      if (prev === null || prev.replica !== replica) return publishState(key, 'pin', 'pin', prev === null ? 'new' : 'move');
      // Unmoved: keep the Redis key alive, at most once per quarter TTL — on the first turn in each
      // quarter since the move, which needs no per-key state beyond the pin itself.
      if (Math.floor((t - prev.since) / refreshEvery) !== Math.floor((prev.lastSeen - prev.since) / refreshEvery)) refresh(key);
    },
    async fetch(key, timeoutMs): Promise<Fetched> {
      const have = local.get(key, now());
      if (have !== null) return { info: have, confirmed: true };
      if (main.status !== 'ready') {
        failed('main', 'fetch', `connection ${main.status}`);
        return { info: null, confirmed: false };
      }
      let timer: NodeJS.Timeout | undefined;
      const read = main.get(redisKey(key)).then((v) => ({ v }), (e: unknown) => ({ e }));
      const out = await Promise.race([read, new Promise<{ e: string }>((r) => { timer = setTimeout(() => r({ e: `no answer within ${timeoutMs} ms` }), timeoutMs); })]);
      clearTimeout(timer);
      if ('e' in out) {
        failed('main', 'fetch', out.e);
        return { info: null, confirmed: false };
      }
      recovered('main');
      const f = out.v === null ? null : splitN(out.v, 2);
      if (f === null) {
        count('fetch_missed');
        return { info: null, confirmed: true };
      }
      // A record this gateway wrote meanwhile is newer than the one read.
      if (local.get(key, now()) === null) apply(key, f[0], f[1], f[2]);
      count('fetched');
      return { info: local.get(key, now()), confirmed: true };
    },
    unpin(key) {
      const had = local.unpin(key);
      publishState(key, 'unpin', 'unpin');
      return had;
    },
    countsByReplica: (t) => local.countsByReplica(t),
    keysOn: (replica, t) => local.keysOn(replica, t),
    keys: (t) => local.keys(t),
    // Local only: every gateway sees the restart in the replica's /metrics itself.
    forgetReplica(replica) {
      const t = now();
      forgotten.set(replica, t);
      // Bounded by what can still matter: a pin older than the TTL is gone from Redis too.
      for (const [name, at] of forgotten) if (t - at > ttlMs) forgotten.delete(name);
      return local.forgetReplica(replica);
    },
    size: () => local.size(),
    ...(activity === null ? {} : {
      announce: (turn, at) => activity.announce(turn, at),
      onTurn: (listener) => activity.onTurn(listener),
      announceAdapter: (sent, at) => activity.announceAdapter(sent, at),
      onAdapterSent: (listener) => activity.onAdapterSent(listener),
      announceInflight: (counts) => activity.announceInflight(counts),
      onPeerInflight: (listener) => activity.onPeerInflight(listener),
      turns: activity.turns,
    }),
    async ready() {
      await Promise.all([whenReady(main), whenReady(sub), subscribed]);
    },
    async close() {
      closed = true;
      activity?.close();
      await Promise.all([main, sub].map(async (c) => {
        if (c.status === 'ready') {
          let timer: NodeJS.Timeout | undefined;
          // QUIT lets queued writes finish; a Redis that stopped answering gets half a second.
          await Promise.race([c.quit().catch(() => {}), new Promise((r) => { timer = setTimeout(r, 500); })]);
          clearTimeout(timer);
        }
        c.disconnect();
      }));
    },
  };
}
