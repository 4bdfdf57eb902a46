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

/**
 * `redis://` / `rediss://` (one server, as ioredis reads it), `redis-sentinel://[:password@]host:port,host:port/<master>`
 * (Sentinel: the master's address comes from the sentinels, and moves with a failover),
 * `redis-cluster://[:password@]host:port,host:port` (Cluster: any reachable nodes; the rest is discovered).
 */
export function redisTarget(url: string): RedisTarget {
  const m = /^(redis-sentinel|redis-cluster):\/\/(?:([^@/]*)@)?([^/]+)(?:\/(.*))?$/.exec(url);
  if (m === null) return { mode: 'single', connect: (o) => new Redis(url, o) };
  const password = m[2] ? decodeURIComponent(m[2].replace(/^[^:]*:/, '')) || undefined : undefined;
  const nodes = nodesOf(m[3]);
  if (m[1] === 'redis-sentinel') {
    const name = m[4] || 'mymaster';
    return { mode: 'sentinel', connect: (o) => new Redis({ ...o, sentinels: nodes, name, ...(password ? { password } : {}) }) };
  }
  return {
    mode: 'cluster',
    connect: (o) => new Cluster(nodes, {
      enableOfflineQueue: o.enableOfflineQueue,
      clusterRetryStrategy: (times) => o.retryStrategy?.(times) ?? 1_000,
      redisOptions: { ...o, ...(password ? { password } : {}) },
    }),
  };
}
