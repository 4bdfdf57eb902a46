import type { Dispatcher } from 'undici';
import type { Logger } from 'pino';
import type { Metrics } from '../telemetry/metrics.js';
import { nowMs } from '../telemetry/hop-clock.js';
import type { Registry, ReplicaState } from './registry.js';
import { parseVllmMetrics } from './vllm-stats.js';

export interface HealthOptions {
  downBackoffMs: number;
  probeIntervalMs: number;
  statsIntervalMs: number;
  probeTimeoutMs: number;
}

export interface Health {
  /** Passive health: the forwarder saw the replica refuse or drop a connection. */
  markDown(r: ReplicaState, cause: string, detail: string): void;
  /** One round of probes (health + models); also used once at start before listening. */
  probeAll(): Promise<void>;
  scrapeAll(): Promise<void>;
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

export function createHealth(deps: {
  registry: Registry; agent: Dispatcher; metrics: Metrics; log: Logger; options: HealthOptions;
  /** A replica that was down comes back with a cold cache: routing forgets what it believed warm there. */
  onRecovered?: (replica: string) => void;
}): Health {
  const { registry, agent, metrics, log, options } = deps;
  const timers: NodeJS.Timeout[] = [];
  // `replica what` pairs whose endpoint is failing. Warn on the transition into failure only (a
  // broken endpoint would otherwise log every interval), count every failure.
  const failing = new Set<string>();
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

  for (const r of registry.replicas) metrics.replicaUp.set({ replica: r.name }, r.up ? 1 : 0);

  function setState(r: ReplicaState, up: boolean, cause: string, detail: string | null) {
    if (r.up === up) return;
    r.up = up;
    metrics.replicaUp.set({ replica: r.name }, up ? 1 : 0);
    metrics.healthTransitions.inc({ replica: r.name, to: up ? 'up' : 'down', cause });
    if (up) {
      log.info({ replica: r.name, cause }, 'replica up: its prefix cache is assumed cold');
      deps.onRecovered?.(r.name);
    }
    else log.warn({ replica: r.name, cause, detail, backoffMs: options.downBackoffMs }, 'replica down: its sessions move to their next choice');
  }

  function markDown(r: ReplicaState, cause: string, detail: string) {
    r.downUntil = nowMs() + options.downBackoffMs;
    r.lastError = `${cause}: ${detail}`;
    r.lastErrorAt = Date.now();
    setState(r, false, cause, detail);
  }

  async function probe(r: ReplicaState): Promise<void> {
    if (!r.up && nowMs() < r.downUntil) return;
    try {
      const health = await get(agent, r, '/health', options.probeTimeoutMs);
      if (health.status >= 300) throw new Error(`GET /health answered ${health.status}`);
      setState(r, true, 'probe', null);
    } catch (e) {
      if (r.up) markDown(r, 'probe', (e as Error).message);
      else r.downUntil = nowMs() + options.downBackoffMs;
      return;
    }
    try {
      const models = await get(agent, r, '/v1/models', options.probeTimeoutMs);
      if (models.status !== 200) throw new Error(`GET /v1/models answered ${models.status}`);
      const data = (JSON.parse(models.text) as { data?: { id?: unknown }[] }).data ?? [];
      r.modelEntries = data;
      r.models = new Set(data.map((m) => m.id).filter((id): id is string => typeof id === 'string'));
      readable(r, 'models');
    } catch (e) {
      unreadable(r, 'models', e as Error, 'cannot read /v1/models: the model filter keeps the last known list');
    }
  }

  async function scrape(r: ReplicaState): Promise<void> {
    if (!r.up) return;
    try {
      const res = await get(agent, r, '/metrics', options.probeTimeoutMs);
      if (res.status !== 200) throw new Error(`GET /metrics answered ${res.status}`);
      const stats = parseVllmMetrics(res.text);
      if (stats === null) throw new Error('no vllm: metrics in /metrics');
      r.waiting = stats.waiting;
      r.running = stats.running;
      r.kvUsage = stats.kvUsage;
      if (stats.kvCapacityTokens !== null) r.kvCapacityTokens = stats.kvCapacityTokens;
      readable(r, 'metrics');
    } catch (e) {
      unreadable(r, 'metrics', e as Error, 'cannot read replica /metrics: routing uses gateway-side load only');
      r.waiting = 0;
      r.kvUsage = 0;
    }
  }

  const probeAll = async () => { await Promise.all(registry.replicas.map(probe)); };
  const scrapeAll = async () => { await Promise.all(registry.replicas.map(scrape)); };

  function every(ms: number, fn: () => Promise<void>) {
    let running = false;
    const t = setInterval(() => {
      if (running) return;
      running = true;
      fn().finally(() => { running = false; });
    }, ms);
    t.unref();
    timers.push(t);
  }

  return {
    markDown,
    probeAll,
    scrapeAll,
    start() {
      every(options.probeIntervalMs, probeAll);
      if (options.statsIntervalMs > 0) every(options.statsIntervalMs, scrapeAll);
    },
    stop() {
      for (const t of timers) clearInterval(t);
      timers.length = 0;
    },
  };
}
