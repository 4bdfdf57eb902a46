import type { Logger } from 'pino';
import type { UpstreamConfig } from '../config/schema.js';
import type { Router } from '../routing/types.js';
import { removeReplicaSeries, type Metrics } from '../telemetry/metrics.js';
import type { Drains } from './drain.js';
import type { Health } from './health.js';
import type { Registry, ReplicaSource } from './registry.js';

export interface Membership {
  /**
   * A replica joins: out until its first check passes and it is warmed, then it takes new sessions.
   * False when the name is already another upstream's replica (a static one, or a second DNS name
   * resolving to the same pod): that one stays its owner's, and this source must not make it leave.
   */
  join(u: UpstreamConfig, source: ReplicaSource): boolean;
  /** A replica leaves: drained (pinned sessions handed off warm), then removed once its streams end. */
  leave(name: string, cause: string): void;
}

const POLL_MS = 100;
/** A departed replica's counters stay this long, so that scrapes see their last increments. */
const SERIES_KEPT_MS = 5 * 60_000;

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
  /** A departed replica's admission queue (queue/admission.ts). */
  forgetAdmission: (name: string) => void;
}): Membership {
  const { registry, health, drains, router, metrics, log } = deps;
  const leaving = new Set<string>();
  // Names claimed by a second source, warned about once each (discovery retries every interval).
  const conflicts = new Set<string>();

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
    conflicts.delete(name);
    registry.remove(name);
    health.left(r);
    router.replicaLeft(name);
    deps.forgetAdmission(name);
    metrics.fleetChanges.inc({ change: 'left' });
    log.warn({ replica: name, inflight: r.inflight }, 'replica left the fleet');
    setTimeout(() => {
      if (registry.byName(name) === undefined) void removeReplicaSeries(metrics, name);
    }, SERIES_KEPT_MS).unref();
  }

  return {
    join(u, source) {
      const had = registry.byName(u.name);
      if (had !== undefined && had.source.upstream !== source.upstream) {
        if (!conflicts.has(u.name)) {
          conflicts.add(u.name);
          metrics.fleetChanges.inc({ change: 'name_conflict' });
          log.warn({ replica: u.name, owner: had.source.upstream, claimedBy: source.upstream }, 'replica already in the fleet through another upstream: it stays that upstream\'s');
        }
        return false;
      }
      if (leaving.delete(u.name)) {
        drains.undrain(u.name);
        log.warn({ replica: u.name }, 'replica back before it had left: undrained');
        return true;
      }
      if (had !== undefined) return true;
      const r = registry.add(u, source);
      metrics.fleetChanges.inc({ change: 'joined' });
      log.warn({ replica: r.name, source: source.kind, upstream: source.upstream }, 'replica joins the fleet: checked and warmed before it takes sessions');
      void health.join(r);
      return true;
    },
    leave(name, cause) {
      if (leaving.has(name) || !registry.byName(name)) return;
      leaving.add(name);
      drains.drain(name, cause);
      finishLeaving(name).catch((e: unknown) => log.error({ replica: name, err: (e as Error).message }, 'replica could not be removed after its drain'));
    },
  };
}
