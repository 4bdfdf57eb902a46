/**
 * One KV event subscriber per replica that publishes (per upstream `kvEvents`, or the top-level
 * `kvEvents.port` convention for dns:// upstreams), kept in step with the registry as replicas
 * come and go. What they read goes to the router; how it goes, to the metrics and (throttled) logs.
 */

import type { Logger } from 'pino';
import type { ResolvedConfig } from '../../config/schema.js';
import type { Router } from '../../routing/types.js';
import type { Metrics } from '../../telemetry/metrics.js';
import { throttle } from '../../telemetry/throttle.js';
import type { ReplicaState } from '../registry.js';
import { createKvSubscriber, type KvStreamObserver, type KvSubscriber } from './subscriber.js';

export interface KvEndpoints {
  readonly endpoint: string;
  readonly replayEndpoint: string | null;
  readonly topic: string;
}

export interface KvStreams {
  /** Subscribers opened and closed to match the replicas (cheap when nothing changed). */
  reconcile(): void;
  start(): void;
  stop(): void;
  setConfig(next: ResolvedConfig): void;
  endpointsOf(name: string): KvEndpoints | null;
}

const RECONCILE_MS = 1000;

/** Where a replica publishes, if it does. */
export function kvEndpointsOf(r: Pick<ReplicaState, 'url' | 'source'>, config: ResolvedConfig): KvEndpoints | null {
  const k = config.kvEvents;
  if (r.source.kind === 'static') {
    const u = config.upstreams.find((x) => x.name === r.source.upstream);
    if (u?.kvEvents === undefined) return null;
    return { endpoint: u.kvEvents.endpoint, replayEndpoint: u.kvEvents.replayEndpoint ?? null, topic: u.kvEvents.topic ?? k.topic };
  }
  if (k.port === null) return null;
  const host = new URL(r.url).hostname; // an IPv6 address keeps its brackets, as zeromq wants
  return { endpoint: `tcp://${host}:${k.port}`, replayEndpoint: k.replayPort === null ? null : `tcp://${host}:${k.replayPort}`, topic: k.topic };
}

export function createKvStreams(deps: { config: ResolvedConfig; replicas: () => readonly ReplicaState[]; router: Router; metrics: Metrics; log: Logger }): KvStreams {
  const { router, metrics: m, log } = deps;
  let config = deps.config;
  const open = new Map<string, { sub: KvSubscriber; at: KvEndpoints }>();
  const errorWarning = throttle(60_000);
  const gapWarning = throttle(60_000);
  let timer: NodeJS.Timeout | null = null;

  const observer: KvStreamObserver = {
    batch(replica, events, lag) {
      m.kvEventLag.observe({ replica }, lag);
      let stored = 0, removed = 0, cleared = 0;
      for (const e of events) {
        if (e.type === 'stored') stored++;
        else if (e.type === 'removed') removed++;
        else cleared++;
      }
      if (stored) m.kvEvents.inc({ replica, type: 'stored' }, stored);
      if (removed) m.kvEvents.inc({ replica, type: 'removed' }, removed);
      if (cleared) m.kvEvents.inc({ replica, type: 'cleared' }, cleared);
      router.kvEvents(replica, events);
    },
    state(replica, state, why) {
      m.kvStreamChanges.inc({ replica, state });
      m.kvStreamLive.set({ replica }, state === 'lost' ? 0 : 1);
      router.kvStream(replica, state);
      if (state === 'live' && why === 'first_batch') log.info({ replica }, 'KV events: stream live, residency on this replica is exact');
      else log.warn({ replica, state, why }, state === 'lost' ? 'KV events: stream lost (a gap no replay filled); back to the retention estimate until it is in order' : `KV events: stream ${state}`);
    },
    gap(replica, missed) {
      m.kvEventGaps.inc({ replica });
      const suppressed = gapWarning();
      if (suppressed !== null) log.warn({ replica, missed, suppressed }, 'KV events: sequence gap (replaying it)');
    },
    replay(replica, outcome) {
      m.kvEventReplays.inc({ replica, outcome });
    },
    error(replica, reason, detail) {
      m.kvEventErrors.inc({ replica, reason });
      const suppressed = errorWarning();
      if (suppressed !== null) log.warn({ replica, reason, detail, suppressed }, 'KV events: message not used');
    },
  };

  function reconcile(): void {
    const seen = new Set<string>();
    for (const r of deps.replicas()) {
      const at = kvEndpointsOf(r, config);
      if (at === null) continue;
      seen.add(r.name);
      const had = open.get(r.name);
      if (had !== undefined && had.at.endpoint === at.endpoint && had.at.replayEndpoint === at.replayEndpoint && had.at.topic === at.topic) continue;
      had?.sub.close();
      const k = config.kvEvents;
      try {
        const sub = createKvSubscriber({ replica: r.name, ...at, medium: k.medium, replayTimeoutMs: k.replayTimeoutMs, maxPendingBatches: k.maxPendingBatches, observer });
        open.set(r.name, { sub, at });
        m.kvStreamLive.set({ replica: r.name }, 0);
      } catch (e) {
        observer.error(r.name, 'socket', e instanceof Error ? e.message : String(e));
      }
    }
    for (const [name, s] of open) {
      if (seen.has(name)) continue;
      s.sub.close();
      open.delete(name);
      router.kvStream(name, 'lost');
    }
  }

  return {
    reconcile,
    start() {
      reconcile();
      timer ??= setInterval(reconcile, RECONCILE_MS).unref();
    },
    stop() {
      if (timer !== null) clearInterval(timer);
      timer = null;
      for (const s of open.values()) s.sub.close();
      open.clear();
    },
    setConfig(next) {
      config = next;
      reconcile();
    },
    endpointsOf: (name) => open.get(name)?.at ?? null,
  };
}
