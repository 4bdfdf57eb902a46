import type { Logger } from 'pino';
import type { Metrics } from '../telemetry/metrics.js';
import { throttle } from '../telemetry/throttle.js';
import type { Registry, ReplicaState } from './registry.js';

/** One attempt's result on a replica, as the forwarder saw it. Bounded: the ejection cause label. */
export type AttemptResult =
  /** The replica answered (2xx-4xx): its run of failures ends. */
  | 'ok'
  | '5xx'
  /** Refused, unreachable, or the TCP/TLS connect timed out. */
  | 'connect'
  /** No response head within timeouts.headersMs. */
  | 'timeout';

/** Every cause an ejection is counted under (its series exist from start at 0). */
export const EJECTION_CAUSES = ['5xx', 'connect', 'timeout'] as const satisfies readonly Exclude<AttemptResult, 'ok'>[];

export interface OutlierOptions {
  consecutiveErrors: number;
  consecutiveConnectFailures: number;
  baseEjectionMs: number;
  maxEjectionMs: number;
  forgetAfterMs: number;
  maxEjectionPercent: number;
}

export interface OutlierDetector {
  observe(r: ReplicaState, result: AttemptResult, detail?: string): void;
  left(r: ReplicaState): void;
  stop(): void;
}

/**
 * Passive outlier detection, as Envoy does it: consecutive 5xx answers or header timeouts
 * (`consecutiveErrors`), or consecutive connect failures (`consecutiveConnectFailures`), from real
 * traffic eject a replica. The n-th ejection lasts n × baseEjectionMs (at most maxEjectionMs); a
 * replica not ejected for forgetAfterMs starts again from one. At most maxEjectionPercent of the
 * fleet is ejected at once (one replica always may be, as in Envoy): past it the ejection is
 * skipped, counted and logged. The replica
 * returns by itself when its time is up (active checks may still keep it down).
 */
export function createOutlierDetector(deps: {
  registry: Registry;
  metrics: Metrics;
  log: Logger;
  options: () => OutlierOptions;
  /** The replica's ejection began or ended: recompute whether it takes traffic. */
  changed(r: ReplicaState, cause: string): void;
}): OutlierDetector {
  const { registry, metrics, log } = deps;
  const timers = new Map<string, NodeJS.Timeout>();
  const skippedWarning = throttle(10_000);

  function ejectedNow(): number {
    const t = Date.now();
    let n = 0;
    for (const r of registry.replicas) if (r.ejectedUntil > t) n++;
    return n;
  }

  function eject(r: ReplicaState, cause: AttemptResult, detail: string | undefined) {
    const o = deps.options();
    const t = Date.now();
    if (r.ejectedUntil > t) return;
    // Envoy's max_ejection_percent: a fleet that fails everywhere keeps serving from what it has.
    // As in Envoy, one replica may always be ejected (unless the share is 0): a fleet of one or
    // two still loses a replica that refuses every connection.
    const share = Math.floor((o.maxEjectionPercent / 100) * registry.replicas.length);
    const allowed = o.maxEjectionPercent > 0 ? Math.max(1, share) : 0;
    const ejected = ejectedNow();
    if (ejected + 1 > allowed) {
      // Counted every time; logged at most once per interval: in a fleet-wide outage every failed
      // request lands here.
      metrics.ejectionsSkipped.inc({ cause });
      const suppressed = skippedWarning();
      if (suppressed !== null) log.warn({ replica: r.name, cause, ejected, allowed, suppressed }, 'outlier not ejected: outlier.maxEjectionPercent of the fleet is already out');
      return;
    }
    if (r.ejections > 0 && t - r.lastEjectedAt > o.forgetAfterMs) r.ejections = 0;
    r.ejections++;
    r.lastEjectedAt = t;
    const ms = Math.min(o.baseEjectionMs * r.ejections, o.maxEjectionMs);
    r.ejectedUntil = t + ms;
    r.consecutiveErrors = 0;
    r.consecutiveConnectFailures = 0;
    if (detail) {
      r.lastError = `${cause}: ${detail}`;
      r.lastErrorAt = t;
    }
    metrics.ejections.inc({ replica: r.name, cause });
    log.warn({ replica: r.name, cause, ejectionMs: ms, ejections: r.ejections, detail }, 'replica ejected: it failed real requests in a row');
    deps.changed(r, `ejected_${cause}`);
    clearTimeout(timers.get(r.name));
    const timer = setTimeout(() => {
      timers.delete(r.name);
      if (registry.byName(r.name) !== r) return;
      r.ejectedUntil = 0;
      deps.changed(r, 'ejection_ended');
    }, ms);
    timer.unref();
    timers.set(r.name, timer);
  }

  return {
    observe(r, result, detail) {
      const o = deps.options();
      switch (result) {
        case 'ok':
          r.consecutiveErrors = 0;
          r.consecutiveConnectFailures = 0;
          return;
        case 'connect':
          r.consecutiveConnectFailures++;
          if (o.consecutiveConnectFailures > 0 && r.consecutiveConnectFailures >= o.consecutiveConnectFailures) eject(r, result, detail);
          return;
        case '5xx':
        case 'timeout':
          r.consecutiveConnectFailures = 0;
          r.consecutiveErrors++;
          if (o.consecutiveErrors > 0 && r.consecutiveErrors >= o.consecutiveErrors) eject(r, result, detail);
      }
    },
    left(r) {
      clearTimeout(timers.get(r.name));
      timers.delete(r.name);
    },
    stop() {
      for (const t of timers.values()) clearTimeout(t);
      timers.clear();
    },
  };
}
