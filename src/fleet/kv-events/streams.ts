/**
 * One KV event subscriber per replica that publishes (per upstream `kvEvents`, or the top-level
 * `kvEvents.port` convention for dns:// upstreams) and per data-parallel rank of it, kept in step
 * with the registry as replicas come and go. vLLM binds rank r's publisher and replay sockets at
 * the configured port + r (its ZmqEventPublisher offsets them so), and each rank is its own
 * engine with its own cache and sequence. What they read goes to the router; how it goes, to the
 * metrics and (throttled) logs.
 */

import type { Logger } from 'pino';
import type { ResolvedConfig } from '../../config/schema.js';
import type { Router } from '../../routing/types.js';
import type { Metrics } from '../../telemetry/metrics.js';
import { throttle } from '../../telemetry/throttle.js';
import type { ReplicaState } from '../registry.js';
import { createKvSubscriber, type KvStreamObserver, type KvSubscriber } from './subscriber.js';

export interface KvEndpoints {
  /** Rank 0's; rank r's is at the same host, port + r. */
  readonly endpoint: string;
  readonly replayEndpoint: string | null;
  readonly topic: string;
  /** Data-parallel ranks publishing (vLLM's --data-parallel-size): one stream each. */
  readonly dataParallelSize: number;
}

/** Rank r's endpoint: vLLM's convention, the port offset by the rank. Throws past 65535. */
export function rankEndpoint(endpoint: string, rank: number): string {
  if (rank === 0) return endpoint;
  const colon = endpoint.lastIndexOf(':');
  const port = Number(endpoint.slice(colon + 1)) + rank;
  if (!(port <= 65535)) throw new Error(`${endpoint} offset by data-parallel rank ${rank} is past port 65535`);
  return `${endpoint.slice(0, colon)}:${port}`;
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
    return { endpoint: u.kvEvents.endpoint, replayEndpoint: u.kvEvents.replayEndpoint ?? null, topic: u.kvEvents.topic ?? k.topic, dataParallelSize: u.kvEvents.dataParallelSize ?? k.dataParallelSize };
  }
  if (k.port === null) return null;
  const host = new URL(r.url).hostname; // an IPv6 address keeps its brackets, as zeromq wants
  return { endpoint: `tcp://${host}:${k.port}`, replayEndpoint: k.replayPort === null ? null : `tcp://${host}:${k.replayPort}`, topic: k.topic, dataParallelSize: k.dataParallelSize };
}

export function createKvStreams(deps: { config: ResolvedConfig; replicas: () => readonly ReplicaState[]; router: Router; metrics: Metrics; log: Logger }): KvStreams {
  const { router, metrics: m, log } = deps;
  let config = deps.config;
  const open = new Map<string, { subs: KvSubscriber[]; at: KvEndpoints }>();
  const errorWarning = throttle(60_000);
  const gapWarning = throttle(60_000);
  let timer: NodeJS.Timeout | null = null;

  const observer: KvStreamObserver = {
    batch(replica, rank, events, lag) {
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
      router.kvEvents(replica, events, rank);
    },
    state(replica, rank, state, why) {
      m.kvStreamChanges.inc({ replica, state });
      // 1 while every rank's stream is in sequence (each stream's sequence says; nothing kept here).
      const s = open.get(replica);
      m.kvStreamLive.set({ replica }, s !== undefined && s.subs.length === s.at.dataParallelSize && s.subs.every((sub) => sub.state() === 'live') ? 1 : 0);
      if (state !== 'proving') router.kvStream(replica, state, rank);
      if (state === 'live' && why === 'first_batch') log.info({ replica, rank }, 'KV events: stream live, the links matched to its engine blocks are exact');
      else if (state === 'lost') log.warn({ replica, rank, why }, 'KV events: stream lost (a gap no replay filled); its matched links are forgotten, and it is not exact until it has proved itself in order again');
      else log.warn({ replica, rank, state, why }, `KV events: stream ${state}`);
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
      if (had !== undefined && had.at.endpoint === at.endpoint && had.at.replayEndpoint === at.replayEndpoint && had.at.topic === at.topic && had.at.dataParallelSize === at.dataParallelSize) continue;
      if (had !== undefined) close(r.name, had);
      const k = config.kvEvents;
      const entry = { subs: [] as KvSubscriber[], at };
      open.set(r.name, entry);
      m.kvStreamLive.set({ replica: r.name }, 0);
      for (let rank = 0; rank < at.dataParallelSize; rank++) {
        try {
          const endpoint = rankEndpoint(at.endpoint, rank);
          const replayEndpoint = at.replayEndpoint === null ? null : rankEndpoint(at.replayEndpoint, rank);
          entry.subs.push(createKvSubscriber({ replica: r.name, rank, endpoint, replayEndpoint, topic: at.topic, medium: k.medium, replayTimeoutMs: k.replayTimeoutMs, maxPendingBatches: k.maxPendingBatches, observer }));
        } catch (e) {
          observer.error(r.name, 'socket', e instanceof Error ? e.message : String(e));
        }
      }
    }
    for (const [name, s] of open) if (!seen.has(name)) close(name, s);
  }

  function close(name: string, s: { subs: KvSubscriber[]; at: KvEndpoints }): void {
    for (const sub of s.subs) sub.close();
    open.delete(name);
    for (let rank = 0; rank < s.at.dataParallelSize; rank++) router.kvStream(name, 'lost', rank);
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
      for (const s of open.values()) for (const sub of s.subs) sub.close();
      open.clear();
    },
    setConfig(next) {
      config = next;
      reconcile();
    },
    endpointsOf: (name) => open.get(name)?.at ?? null,
  };
}
