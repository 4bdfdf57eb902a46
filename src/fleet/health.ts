import type { Dispatcher } from 'undici';
import type { Logger } from 'pino';
import type { Metrics } from '../telemetry/metrics.js';
import { createOutlierDetector, type AttemptResult, type OutlierOptions } from './outlier.js';
import type { Registry, ReplicaState } from './registry.js';
import { createConfigWatch } from './config-watch.js';
import { adaptersOf } from './lora-info.js';
import { parseVllmMetrics } from './vllm-stats.js';

export interface HealthOptions {
  probeIntervalMs: number;
  probeTimeoutMs: number;
  /** Consecutive failed checks before down; consecutive passed checks before up again. */
  unhealthyThreshold: number;
  healthyThreshold: number;
  statsIntervalMs: number;
  /** A replica down longer than this has surely lost its prefix cache (routing.options.prefixTtlMs). */
  prefixTtlMs: number;
  outlier: OutlierOptions;
}

/** Why routing forgets a replica's warm state; bounded (a metric label). */
export type ColdReason = 'restart' | 'long_outage';

export interface Health {
  /** The forwarder's per-attempt result on a replica (passive outlier detection). */
  observe(r: ReplicaState, result: AttemptResult, detail?: string): void;
  /** Marks a replica down as if its checks had failed (tests, and a replica that cannot be used). */
  markDown(r: ReplicaState, cause: string, detail: string): void;
  /** Recomputes whether routing may use the replica (after warming or ejection changes; draining is its own flag). */
  refresh(r: ReplicaState): void;
  /** One round of checks (health + models). The first one, before listening, decides directly. */
  probeAll(): Promise<void>;
  scrapeAll(): Promise<void>;
  /**
   * A replica that just joined the fleet: out until its first check passes and (when warmup is on)
   * it has been warmed; checked at once.
   */
  join(r: ReplicaState): Promise<void>;
  /** Forgets a replica that left the fleet (its gauges too: replica labels stay bounded by the fleet). */
  left(r: ReplicaState): void;
  setOptions(o: HealthOptions): void;
  /** Reads the replica's /v1/models again now (an adapter was loaded or unloaded there). */
  readModels(r: ReplicaState): Promise<boolean>;
  start(): void;
  stop(): void;
}

async function get(agent: Dispatcher, r: ReplicaState, path: string, timeoutMs: number): Promise<{ status: number; text: string }> {
  const res = await agent.request({
    origin: r.origin, path, method: 'GET',
    headers: r.apiKey ? { authorization: `Bearer ${r.apiKey}` } : {},
    headersTimeout: timeoutMs, bodyTimeout: timeoutMs, signal: AbortSignal.timeout(timeoutMs),
  });
  return { status: res.statusCode, text: await res.body.text() };
}

export interface HealthDeps {
  registry: Registry;
  agent: Dispatcher;
  metrics: Metrics;
  log: Logger;
  options: HealthOptions;
  /**
   * The replica has surely lost its cache: routing forgets its prefix index and pins. After a
   * restart, `newProcessSince` (wall ms) is when its current process started, or the latest time
   * the old one was surely still running: what it stored before then is gone.
   */
  forget(replica: string, cause: ColdReason, newProcessSince: number | null): void;
  /** The replica comes back cold: warm it (fleet/warmup.ts) before it takes sessions. */
  warm?(r: ReplicaState, reason: ColdReason | 'join'): void;
  /** The replica's models were read for the first time (its tokenizer can be asked now). */
  modelsKnown?(r: ReplicaState): void;
}

/**
 * Whether each replica takes traffic: active checks with thresholds (down after N failed checks,
 * up after M passed ones), passive outlier ejection (outlier.ts), and warmup, combined into the
 * one `up` flag routing reads. A short outage keeps what routing believes warm there; a restart
 * (seen in /metrics) or an outage longer than the prefix TTL forgets it. A failed scrape leaves
 * the last load figures in place, visible as stale by their age, never read as "no load".
 */
export function createHealth(deps: HealthDeps): Health {
  const { registry, agent, metrics, log } = deps;
  let options = deps.options;
  const timers: NodeJS.Timeout[] = [];
  // Replicas checked at least once; the first check decides at once (no history to weigh).
  const probed = new WeakSet<ReplicaState>();
  // Replicas that joined at run time and are warmed once their first check passes.
  const joining = new Set<string>();
  // `replica what` pairs whose endpoint is failing. Warn on the transition into failure only (a
  // broken endpoint would otherwise log every interval), count every failure.
  const failing = new Set<string>();
  // Replicas configured unlike the rest, from what the checks below read anyway.
  const configWatch = createConfigWatch({ metrics, log, byName: (name) => registry.byName(name) });
  function unreadable(r: ReplicaState, what: 'models' | 'metrics', e: Error, msg: string) {
    metrics.scrapeErrors.inc({ replica: r.name, what });
    const k = `${r.name} ${what}`;
    if (failing.has(k)) return;
    failing.add(k);
    log.warn({ replica: r.name, err: e.message }, msg);
  }
  function readable(r: ReplicaState, what: 'models' | 'metrics') {
    if (failing.delete(`${r.name} ${what}`)) log.info({ replica: r.name, what }, 'replica endpoint readable again');
  }

  // Why the replica last stopped taking traffic, for the transition's label when it returns.
  const downCause = new Map<string, string>();
  // Replicas that answered a check at least once (a WeakSet: a replica that leaves is forgotten with it).
  const passedCheck = new WeakSet<ReplicaState>();
  // Reads of each replica's /v1/models begun and the latest applied, in order.
  const modelReads = new WeakMap<ReplicaState, { started: number; applied: number }>();

  function refresh(r: ReplicaState, cause = 'check') {
    const up = r.healthy && r.ejectedUntil <= Date.now() && !r.warming;
    if (r.up === up) return;
    r.up = up;
    metrics.replicaUp.set({ replica: r.name }, up ? 1 : 0);
    metrics.healthTransitions.inc({ replica: r.name, to: up ? 'up' : 'down', cause });
    if (up) {
      const downFor = r.downSince === null ? 0 : Date.now() - r.downSince;
      r.downSince = null;
      log.warn({ replica: r.name, cause, downForMs: downFor, after: downCause.get(r.name) }, 'replica back: takes traffic again');
    } else {
      r.downSince ??= Date.now();
      downCause.set(r.name, cause);
      // A replica that never passed a check has had no sessions to move: say only that it waits.
      if (cause === 'check' && !passedCheck.has(r)) log.warn({ replica: r.name, cause, detail: r.lastError }, 'replica not reachable: it takes no traffic until it passes its checks');
      else if (!r.warming) log.warn({ replica: r.name, cause, detail: r.lastError }, 'replica out: its sessions move to their next choice');
    }
  }

  const outlier = createOutlierDetector({ registry, metrics, log, options: () => options.outlier, changed: (r, cause) => refresh(r, cause) });

  function forget(r: ReplicaState, cause: ColdReason, newProcessSince: number | null = null) {
    metrics.warmStateForgotten.inc({ replica: r.name, cause });
    log.warn({ replica: r.name, cause }, 'replica has lost its cache: routing forgets its prefix index and pins there');
    deps.forget(r.name, cause, newProcessSince);
    if (deps.warm) deps.warm(r, cause);
  }

  function markDown(r: ReplicaState, cause: string, detail: string) {
    r.lastError = `${cause}: ${detail}`;
    r.lastErrorAt = Date.now();
    r.healthy = false;
    r.checkSuccesses = 0;
    refresh(r, cause);
  }

  for (const r of registry.replicas) metrics.replicaUp.set({ replica: r.name }, r.up ? 1 : 0);

  /** Enough passed checks on a down replica: scrape it first, so a restart is known before it takes sessions. */
  async function returning(r: ReplicaState) {
    const downFor = r.downSince === null ? 0 : Date.now() - r.downSince;
    const restarted = await scrape(r, true);
    r.healthy = true;
    if (joining.delete(r.name)) deps.warm?.(r, 'join');
    else if (!restarted && r.downSince !== null && downFor > options.prefixTtlMs) forget(r, 'long_outage');
    refresh(r, 'check');
  }

  async function probe(r: ReplicaState): Promise<void> {
    let ok = false;
    let detail = '';
    try {
      const health = await get(agent, r, '/health', options.probeTimeoutMs);
      ok = health.status < 300;
      if (!ok) detail = `GET /health answered ${health.status}`;
    } catch (e) {
      detail = (e as Error).message;
    }
    if (registry.byName(r.name) !== r) return; // left the fleet meanwhile
    const decisive = !probed.has(r);
    probed.add(r);
    if (ok) {
      passedCheck.add(r);
      r.checkFailures = 0;
      r.checkSuccesses++;
      if (!r.healthy && (decisive || r.checkSuccesses >= options.healthyThreshold)) await returning(r);
    } else {
      r.checkSuccesses = 0;
      r.checkFailures++;
      r.lastError = `check: ${detail}`;
      r.lastErrorAt = Date.now();
      // The first round has no history to weigh: a replica that does not answer starts down.
      if (r.healthy && (decisive || r.checkFailures >= options.unhealthyThreshold)) markDown(r, 'check', detail);
      return;
    }
    await readModels(r);
  }

  /** The replica's /v1/models: its models and adapters (at every check, and after an adapter load or unload). */
  async function readModels(r: ReplicaState): Promise<boolean> {
    // A read that started before a later one was applied is older news: dropped (an adapter
    // unloaded meanwhile must not come back from a check that began before its unload).
    const seq = modelReads.get(r) ?? { started: 0, applied: 0 };
    modelReads.set(r, seq);
    const mine = ++seq.started;
    try {
      const models = await get(agent, r, '/v1/models', options.probeTimeoutMs);
      if (models.status !== 200) throw new Error(`GET /v1/models answered ${models.status}`);
      const data = (JSON.parse(models.text) as { data?: { id?: unknown }[] }).data ?? [];
      if (mine < seq.applied) return true;
      seq.applied = mine;
      r.modelEntries = data;
      r.adapters = adaptersOf(data);
      configWatch.modelsRead(r, data);
      const first = r.models === null;
      r.models = new Set(data.map((m) => m.id).filter((id): id is string => typeof id === 'string'));
      readable(r, 'models');
      if (first) deps.modelsKnown?.(r);
      return true;
    } catch (e) {
      unreadable(r, 'models', e as Error, 'cannot read /v1/models: the model filter keeps the last known list');
      return false;
    }
  }

  /** Reads the replica's load and notices a restart; true when it restarted. */
  async function scrape(r: ReplicaState, evenIfDown = false): Promise<boolean> {
    if (!r.healthy && !evenIfDown) return false;
    try {
      const res = await get(agent, r, '/metrics', options.probeTimeoutMs);
      if (res.status !== 200) throw new Error(`GET /metrics answered ${res.status}`);
      const stats = parseVllmMetrics(res.text);
      if (stats === null) throw new Error('no vllm: metrics in /metrics');
      r.waiting = stats.waiting;
      r.running = stats.running;
      r.kvUsage = stats.kvUsage;
      r.lora = stats.lora;
      if (stats.kvCapacityTokens !== null) r.kvCapacityTokens = stats.kvCapacityTokens;
      configWatch.metricsRead(r, stats.cacheConfigLabels, stats.kvCapacityTokens);
      const lastSeenAlive = r.lastScrapeAt;
      r.lastScrapeAt = Date.now();
      const restarted = (r.startTimeSeconds !== null && stats.startTimeSeconds !== null && stats.startTimeSeconds !== r.startTimeSeconds)
        || (r.prefixQueries !== null && stats.prefixQueries !== null && stats.prefixQueries < r.prefixQueries);
      r.startTimeSeconds = stats.startTimeSeconds;
      r.prefixQueries = stats.prefixQueries;
      readable(r, 'metrics');
      // The new process's start time when it is exported; otherwise (counters going backwards) the
      // previous scrape, the last time the old process was surely running.
      if (restarted) forget(r, 'restart', stats.startTimeSeconds !== null ? stats.startTimeSeconds * 1000 : lastSeenAlive);
      return restarted;
    } catch (e) {
      // The last figures stay: a replica that cannot be read is not an idle one. Their age shows.
      unreadable(r, 'metrics', e as Error, 'cannot read replica /metrics: its last load figures stay, and age');
      return false;
    }
  }

  const probeAll = async () => { await Promise.all(registry.replicas.map(probe)); };
  const scrapeAll = async () => { await Promise.all(registry.replicas.map((r) => scrape(r))); };

  function every(ms: () => number, fn: () => Promise<void>) {
    let running = false;
    const tick = () => {
      const t = setTimeout(() => {
        timers.splice(timers.indexOf(t), 1);
        if (!running) {
          running = true;
          fn().finally(() => { running = false; });
        }
        tick();
      }, ms());
      t.unref();
      timers.push(t);
    };
    tick();
  }

  return {
    observe: (r, result, detail) => outlier.observe(r, result, detail),
    markDown,
    refresh: (r) => refresh(r, r.warming ? 'warming' : 'check'),
    probeAll,
    scrapeAll,
    async join(r) {
      r.healthy = false;
      r.up = false;
      metrics.replicaUp.set({ replica: r.name }, 0);
      joining.add(r.name);
      await probe(r);
    },
    left(r) {
      joining.delete(r.name);
      downCause.delete(r.name);
      failing.delete(`${r.name} models`);
      failing.delete(`${r.name} metrics`);
      outlier.left(r);
      configWatch.left(r);
      metrics.replicaUp.remove({ replica: r.name });
      metrics.scrapeAge.remove({ replica: r.name });
      metrics.inflight.remove({ replica: r.name });
      metrics.sessionsPinned.remove({ replica: r.name });
      metrics.queued.remove({ replica: r.name });
    },
    setOptions(o) { options = o; },
    readModels,
    start() {
      every(() => options.probeIntervalMs, probeAll);
      every(() => options.statsIntervalMs || 1_000, () => (options.statsIntervalMs > 0 ? scrapeAll() : Promise.resolve()));
    },
    stop() {
      for (const t of timers) clearTimeout(t);
      timers.length = 0;
      outlier.stop();
      configWatch.stop();
    },
  };
}
