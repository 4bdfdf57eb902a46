import { Resolver } from 'node:dns/promises';
import { isIPv6 } from 'node:net';
import type { Logger } from 'pino';
import type { UpstreamConfig } from '../config/schema.js';
import type { Metrics } from '../telemetry/metrics.js';
import type { Membership } from './membership.js';

export interface DiscoveryOptions {
  intervalMs: number;
  /** DNS servers (`ip` or `ip:port`); empty: the system's. */
  servers: readonly string[];
}

/** What discovery needs of DNS: the A and AAAA records of a name (node's Resolver, or a test's). */
export interface AddressResolver {
  resolve4(name: string): Promise<string[]>;
  resolve6(name: string): Promise<string[]>;
}

export interface Discovery {
  /** Resolves every dns:// upstream once; joins go through membership. */
  refresh(): Promise<void>;
  /** The dns:// upstreams of a (reloaded) configuration; names no longer listed leave. */
  setUpstreams(upstreams: readonly UpstreamConfig[], options: DiscoveryOptions): void;
  start(): void;
  stop(): void;
}

/** A `dns://name:port` upstream's host and port. */
export function dnsTarget(u: UpstreamConfig): { host: string; port: number } {
  const url = new URL(u.url.replace(/^dns:/, 'http:'));
  return { host: url.hostname, port: Number(url.port || 80) };
}

/** The replica one address of a dns:// upstream stands for: named `ip:port`, like a static one. */
export function memberOf(u: UpstreamConfig, ip: string, port: number): UpstreamConfig {
  const host = isIPv6(ip) ? `[${ip}]` : ip;
  return { name: `${host}:${port}`, url: `http://${host}:${port}`, weight: u.weight, ...(u.apiKey ? { apiKey: u.apiKey } : {}) };
}

// Answers that mean "this family has no records", as opposed to a resolver that failed.
const NO_RECORDS = new Set(['ENODATA', 'ENOTFOUND']);

export function systemResolver(servers: readonly string[]): AddressResolver {
  const r = new Resolver({ timeout: 2_000, tries: 2 });
  if (servers.length > 0) r.setServers([...servers]);
  return r;
}

/**
 * dns:// upstreams, the Kubernetes headless-Service way: A and AAAA records re-resolved every
 * intervalMs. A new address joins (checked and warmed first), a vanished one is drained with warm
 * handoff and then removed. A resolver that fails, or a name that suddenly resolves to nothing,
 * keeps the last known addresses (logged): an outage of DNS is not an outage of the fleet.
 */
export function createDiscovery(deps: {
  membership: Membership;
  log: Logger;
  metrics: Metrics;
  upstreams: readonly UpstreamConfig[];
  options: DiscoveryOptions;
  /** Tests inject one; otherwise node's resolver with options.servers. */
  resolver?: AddressResolver;
}): Discovery {
  const { membership, log, metrics } = deps;
  for (const reason of ['lookup_failed', 'empty_answer']) metrics.discoveryFallbacks.inc({ reason }, 0);
  let options = deps.options;
  let resolver = deps.resolver ?? systemResolver(options.servers);
  let upstreams = deps.upstreams.filter((u) => u.url.startsWith('dns:'));
  // Members (replica names) per dns:// upstream name.
  const members = new Map<string, Set<string>>();
  let timer: NodeJS.Timeout | null = null;
  // Upstreams whose last refresh kept the old addresses, and why: logged when that starts and ends.
  const failing = new Map<string, 'lookup_failed' | 'empty_answer'>();

  async function lookup(host: string): Promise<string[]> {
    const family = async (f: () => Promise<string[]>) => {
      try {
        return await f();
      } catch (e) {
        if (NO_RECORDS.has((e as NodeJS.ErrnoException).code ?? '')) return [];
        throw e;
      }
    };
    const [v4, v6] = await Promise.all([family(() => resolver.resolve4(host)), family(() => resolver.resolve6(host))]);
    return [...v4, ...v6];
  }

  async function refreshOne(u: UpstreamConfig) {
    const { host, port } = dnsTarget(u);
    let ips: string[];
    try {
      ips = await lookup(host);
    } catch (e) {
      metrics.discoveryFallbacks.inc({ reason: 'lookup_failed' });
      if (failing.get(u.name) !== 'lookup_failed') log.warn({ upstream: u.name, host, err: (e as Error).message }, 'DNS lookup failed: keeping the last known addresses');
      failing.set(u.name, 'lookup_failed');
      return;
    }
    const had = members.get(u.name) ?? new Set<string>();
    if (ips.length === 0 && had.size > 0) {
      metrics.discoveryFallbacks.inc({ reason: 'empty_answer' });
      if (failing.get(u.name) !== 'empty_answer') log.warn({ upstream: u.name, host, kept: had.size }, 'DNS name resolves to nothing: keeping the last known addresses');
      failing.set(u.name, 'empty_answer');
      return;
    }
    if (failing.delete(u.name)) log.info({ upstream: u.name, host }, 'DNS answers again: the addresses follow it');
    const now = new Set<string>();
    for (const ip of ips) {
      const m = memberOf(u, ip, port);
      // Only this upstream's own members are tracked, so only they can be made to leave by it.
      if (had.has(m.name) || membership.join(m, { upstream: u.name, kind: 'dns' })) now.add(m.name);
    }
    for (const name of had) if (!now.has(name)) membership.leave(name, 'dns');
    members.set(u.name, now);
  }

  const refresh = async () => { await Promise.all(upstreams.map(refreshOne)); };

  function schedule() {
    if (timer !== null || upstreams.length === 0) return;
    timer = setTimeout(() => {
      timer = null;
      void refresh().finally(schedule);
    }, options.intervalMs);
    timer.unref();
  }

  return {
    refresh,
    setUpstreams(next, o) {
      const dns = next.filter((u) => u.url.startsWith('dns:'));
      const names = new Set(dns.map((u) => u.name));
      for (const [name, set] of members) {
        if (names.has(name)) continue;
        for (const m of set) membership.leave(m, 'config');
        members.delete(name);
      }
      if (o.servers.join() !== options.servers.join() && !deps.resolver) resolver = systemResolver(o.servers);
      options = o;
      upstreams = dns;
      void refresh();
      schedule();
    },
    start: schedule,
    stop() {
      if (timer !== null) clearTimeout(timer);
      timer = null;
    },
  };
}
