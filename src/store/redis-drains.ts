import type { Cluster, Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Metrics } from '../telemetry/metrics.js';
import { redisTarget } from './redis-connect.js';
import { EXPIRE_DRAIN } from './redis-scripts.js';

type DrainConn = (Redis | Cluster) & { wrExpireDrain(key: string, name: string, seen: string): Promise<number> };

/** Gives a connection the conditional delete of a drain entry (EXPIRE_DRAIN). */
export function withExpireDrain(conn: Redis | Cluster): DrainConn {
  conn.defineCommand('wrExpireDrain', { numberOfKeys: 1, lua: EXPIRE_DRAIN });
  return conn as DrainConn;
}

/**
 * Deletes the drain entry of `name` in the hash `key` if it still holds `seen` (the time this
 * gateway read): true when deleted, false when another gateway rewrote it since.
 */
export async function expireDrainEntry(conn: DrainConn, key: string, name: string, seen: string): Promise<boolean> {
  return (await conn.wrExpireDrain(key, name, seen)) === 1;
}

/** How often each gateway reads the shared drain state: a drain reaches every gateway within it (plus a round trip). */
export const DRAIN_POLL_MS = 500;
/**
 * A drain entry no gateway has refreshed for this long is deleted: every gateway that has the
 * replica rewrites its entry's time (at a quarter of this), so an entry goes only once the
 * replica has left every gateway's fleet for this long.
 */
export const DRAIN_ENTRY_TTL_MS = 10 * 60_000;

export interface SharedDrains {
  /** This gateway drained (true) or undrained (false) a replica by hand: every other gateway follows. */
  set(name: string, draining: boolean): void;
  close(): Promise<void>;
}

/**
 * Drain state shared between gateways: a drain through one pod of the admin Service reaches all.
 * One Redis hash (`<prefix>drains`: replica → when a gateway that has it last vouched for it)
 * holds the replicas drained by hand; every gateway reads it every DRAIN_POLL_MS (one HGETALL: a
 * gateway that starts, or that was cut off, catches up by the same read). A drained replica this
 * gateway has and is not draining is drained — also one it discovers later, whenever it appears
 * (or leaves and comes back); an entry gone undrains what this gateway drained for it. Entries
 * of replicas no gateway has expire (DRAIN_ENTRY_TTL_MS). A change made here is written before
 * the next read, and kept until Redis takes it.
 */
export function createSharedDrains(opts: {
  url: string;
  keyPrefix: string;
  metrics: Metrics;
  log: Logger;
  /** Apply another gateway's drain (true) or undrain (false) here. */
  apply(name: string, draining: boolean): void;
  /** Whether this gateway has the replica: null when not (yet), else whether it is draining. */
  draining(name: string): boolean | null;
  /** Tests only: DRAIN_ENTRY_TTL_MS. */
  entryTtlMs?: number;
}): SharedDrains {
  const { metrics, log } = opts;
  const ttl = opts.entryTtlMs ?? DRAIN_ENTRY_TTL_MS;
  const key = `${opts.keyPrefix}drains`;
  const conn = redisTarget(opts.url).connect({ enableOfflineQueue: false, maxRetriesPerRequest: 1, connectTimeout: 2_000, commandTimeout: 2_000, retryStrategy: (n) => Math.min(50 * 2 ** Math.min(n, 10), 2_000) });
  conn.on('error', () => {}); // counted where a command fails, below
  const drains = withExpireDrain(conn);
  const pending = new Map<string, boolean>();
  /** Replicas drained here because the hash says so (or by this gateway's own admin call). */
  let applied = new Set<string>();
  let failing = false;
  let closed = false;
  let busy = false;

  const fail = (e: unknown) => {
    metrics.storeErrors.inc({ store: 'sessions', op: 'drain' });
    if (!failing) log.warn({ err: (e as Error)?.message ?? String(e) }, 'shared drain state unreachable: drains apply to this gateway only until Redis returns');
    failing = true;
  };

  async function poll() {
    if (busy || closed || conn.status !== 'ready') return;
    busy = true;
    try {
      for (const [name, draining] of [...pending]) {
        if (draining) await conn.hset(key, name, `${Date.now()}`);
        else await conn.hdel(key, name);
        if (pending.get(name) === draining) pending.delete(name);
        if (draining) applied.add(name);
        else applied.delete(name);
      }
      const entries = await conn.hgetall(key);
      if (failing) log.info('shared drain state reachable again');
      failing = false;
      const t = Date.now();
      const now = new Set<string>();
      for (const [name, at] of Object.entries(entries)) {
        const here = opts.draining(name);
        const age = t - Number(at);
        if (here === null && !(age <= ttl)) {
          if (await expireDrainEntry(drains, key, name, at)) continue;
          // Refreshed since the read by a gateway that has the replica: still drained.
        }
        if (here !== null && !(age <= ttl / 4)) await conn.hset(key, name, `${t}`);
        now.add(name);
        if (here === false && !pending.has(name)) opts.apply(name, true);
      }
      for (const name of applied) if (!now.has(name) && !pending.has(name)) opts.apply(name, false);
      applied = new Set([...now].filter((name) => opts.draining(name) === true));
    } catch (e) {
      fail(e);
    } finally {
      busy = false;
    }
  }

  const timer = setInterval(() => void poll(), DRAIN_POLL_MS);
  timer.unref();
  conn.on('ready', () => void poll());

  return {
    set(name, draining) {
      pending.set(name, draining);
      void poll();
    },
    async close() {
      closed = true;
      clearInterval(timer);
      if (conn.status === 'ready') await conn.quit().catch(() => {});
      conn.disconnect();
    },
  };
}
