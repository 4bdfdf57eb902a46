import type { Logger } from 'pino';
import type { UpstreamConfig } from '../config/schema.js';
import type { Router } from '../routing/types.js';
import type { Metrics } from '../telemetry/metrics.js';
import type { Drains } from './drain.js';
import type { Health } from './health.js';
import type { Registry, ReplicaSource } from './registry.js';

export interface Membership {
  /** A replica joins: out until its first check passes and it is warmed, then it takes new sessions. */
  join(u: UpstreamConfig, source: ReplicaSource): void;
  /** A replica leaves: drained (pinned sessions handed off warm), then removed once its streams end. */
  leave(name: string, cause: string): void;
  /** Names joined or leaving, for tests and the log. */
  leaving(): ReadonlySet<string>;
}

const POLL_MS = 100;

/**
 * Replicas joining and leaving at run time (DNS discovery, config reload). Leaving is a drain
 * with warm handoff followed by removal once the replica has nothing in flight (at most drainMs);
 * a replica that comes back while it is leaving is simply undrained.
 */
export function createMembership(deps: {
  registry: Registry;
  health: Health;
  drains: Drains;
  router: Router;
  metrics: Metrics;
  log: Logger;
  drainMs: () => number;
}): Membership {
  const { registry, health, drains, router, metrics, log } = deps;
  const leaving = new Set<string>();

  async function finishLeaving(name: string) {
    await drains.settled(name);
    const deadline = Date.now() + deps.drainMs();
    for (;;) {
      const r = registry.byName(name);
      if (r === undefined || !leaving.has(name)) return;
      if (r.inflight === 0 || Date.now() >= deadline) break;
      await new Promise((res) => setTimeout(res, POLL_MS).unref());
    }
    const r = registry.byName(name);
    if (r === undefined || !leaving.delete(name)) return;
    registry.remove(name);
    health.left(r);
    router.forgetReplica(name);
    metrics.fleetChanges.inc({ change: 'left' });
    log.warn({ replica: name, inflight: r.inflight }, 'replica left the fleet');
  }

  return {
    join(u, source) {
      if (leaving.delete(u.name)) {
        drains.undrain(u.name);
        log.warn({ replica: u.name }, 'replica back before it had left: undrained');
        return;
      }
      if (registry.byName(u.name)) return;
      const r = registry.add(u, source);
      metrics.fleetChanges.inc({ change: 'joined' });
      log.warn({ replica: r.name, source: source.kind, upstream: source.upstream }, 'replica joins the fleet: checked and warmed before it takes sessions');
      void health.join(r);
    },
    leave(name, cause) {
      if (leaving.has(name) || !registry.byName(name)) return;
      leaving.add(name);
      drains.drain(name, cause);
      void finishLeaving(name);
    },
    leaving: () => leaving,
  };
}
