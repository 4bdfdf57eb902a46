import { Cluster, Redis, type RedisOptions } from 'ioredis';

/** A Redis deployment from its URL: one server, Sentinel, or Cluster. */
export interface RedisTarget {
  readonly mode: 'single' | 'sentinel' | 'cluster';
  /** A new connection (main or subscriber) with these options. */
  connect(opts: RedisOptions): Redis | Cluster;
}

function nodesOf(hosts: string): { host: string; port: number }[] {
  return hosts.split(',').filter(Boolean).map((h) => {
    const i = h.lastIndexOf(':');
    return i < 0 ? { host: h, port: 6379 } : { host: h.slice(0, i).replace(/^\[|\]$/g, ''), port: Number(h.slice(i + 1)) };
  });
}

/** `user:password`, `:password` (no ACL user) or `password` alone, as in a redis:// URL. */
function credentialsOf(userinfo: string | undefined): { username?: string; password?: string } {
  if (!userinfo) return {};
  const colon = userinfo.indexOf(':');
  const username = colon < 0 ? '' : decodeURIComponent(userinfo.slice(0, colon));
  const password = decodeURIComponent(colon < 0 ? userinfo : userinfo.slice(colon + 1));
  return { ...(username ? { username } : {}), ...(password ? { password } : {}) };
}

/**
 * `redis://` / `rediss://` (one server, as ioredis reads it), `redis-sentinel://[[user]:password@]host:port,host:port/<master>`
 * (Sentinel: the master's address comes from the sentinels, and moves with a failover),
 * `redis-cluster://[[user]:password@]host:port,host:port` (Cluster: any reachable nodes; the rest is discovered).
 */
export function redisTarget(url: string): RedisTarget {
  const m = /^(redis-sentinel|redis-cluster):\/\/(?:([^@/]*)@)?([^/]+)(?:\/(.*))?$/.exec(url);
  if (m === null) return { mode: 'single', connect: (o) => new Redis(url, o) };
  const auth = credentialsOf(m[2]);
  const nodes = nodesOf(m[3]);
  if (m[1] === 'redis-sentinel') {
    const name = m[4] || 'mymaster';
    return { mode: 'sentinel', connect: (o) => new Redis({ ...o, sentinels: nodes, name, ...auth }) };
  }
  return {
    mode: 'cluster',
    connect: (o) => new Cluster(nodes, {
      enableOfflineQueue: o.enableOfflineQueue,
      clusterRetryStrategy: (times) => o.retryStrategy?.(times) ?? 1_000,
      redisOptions: { ...o, ...auth },
    }),
  };
}
