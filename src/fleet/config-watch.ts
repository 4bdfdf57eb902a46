import type { Logger } from 'pino';
import type { Metrics } from '../telemetry/metrics.js';
import { auditFleet, type Mismatch } from './config-audit.js';
import type { ReplicaState } from './registry.js';
import { cacheConfigOf, CONFIG_SETTINGS, servedModelsOf, UNREAD_CONFIG, type ConfigSetting, type ReplicaConfig } from './replica-config.js';

/** Fed by the health checks with what they read; flags the replicas configured unlike the rest. */
export interface ConfigWatch {
  /** A /metrics scrape: vllm:cache_config_info's labels (null when absent) and the KV capacity. */
  metricsRead(r: ReplicaState, cacheConfigLabels: Record<string, string> | null, kvCapacityTokens: number | null): void;
  /** A /v1/models answer's entries. */
  modelsRead(r: ReplicaState, entries: readonly unknown[]): void;
  left(r: ReplicaState): void;
  stop(): void;
}

/** A round of checks reads every replica within milliseconds: the audit waits for the round, not each answer. */
const SETTLE_MS = 100;

const sameConfig = (a: ReplicaConfig, b: ReplicaConfig) => JSON.stringify(a) === JSON.stringify(b);

/**
 * The fleet configuration audit, live: whenever what a replica reports of its configuration is
 * first read or changes (the gateway starts, a replica joins or restarts with other flags), the
 * fleet is audited again (fleet/config-audit.ts). Each flagged setting: a warn line naming it,
 * warmroute_replica_config_mismatch{replica,setting} = 1, and the replica's `configMismatch`
 * (GET /admin/replicas). A setting that agrees again goes back to 0, with an info line.
 */
export function createConfigWatch(deps: { metrics: Metrics; log: Logger; byName(name: string): ReplicaState | undefined }): ConfigWatch {
  const { metrics, log } = deps;
  const configs = new Map<string, ReplicaConfig>();
  const flagged = new Map<string, Set<ConfigSetting>>();
  let timer: NodeJS.Timeout | null = null;

  function audit() {
    timer = null;
    const result = auditFleet(configs);
    for (const name of configs.keys()) {
      const found: Mismatch[] = result.get(name) ?? [];
      const before = flagged.get(name) ?? new Set<ConfigSetting>();
      const now = new Set(found.map((m) => m.setting));
      for (const setting of CONFIG_SETTINGS) metrics.replicaConfigMismatch.set({ replica: name, setting }, now.has(setting) ? 1 : 0);
      for (const m of found) {
        if (!before.has(m.setting)) log.warn({ replica: name, setting: m.setting, value: m.value, fleet: m.fleet }, `replica configured unlike the fleet: ${m.setting} is ${m.value} (fleet: ${m.fleet}); its latency and cache hits will differ from the others'`);
      }
      for (const s of before) if (!now.has(s)) log.info({ replica: name, setting: s }, 'replica configuration agrees with the fleet again');
      flagged.set(name, now);
      const r = deps.byName(name);
      if (r !== undefined) r.configMismatch = found;
    }
  }

  function update(r: ReplicaState, next: ReplicaConfig) {
    const prev = configs.get(r.name);
    r.config = next;
    if (prev !== undefined && sameConfig(prev, next)) return;
    configs.set(r.name, next);
    if (timer === null) {
      timer = setTimeout(audit, SETTLE_MS);
      timer.unref();
    }
  }

  return {
    metricsRead(r, labels, kvCapacityTokens) {
      const prev = configs.get(r.name) ?? UNREAD_CONFIG;
      update(r, { ...prev, ...cacheConfigOf(labels), kvCapacityTokens });
    },
    modelsRead(r, entries) {
      const prev = configs.get(r.name) ?? UNREAD_CONFIG;
      update(r, { ...prev, models: servedModelsOf(entries) });
    },
    left(r) {
      if (!configs.delete(r.name)) return;
      flagged.delete(r.name);
      for (const setting of CONFIG_SETTINGS) metrics.replicaConfigMismatch.remove({ replica: r.name, setting });
      // The one that differed may have been the one that left.
      if (timer === null && configs.size > 0) {
        timer = setTimeout(audit, SETTLE_MS);
        timer.unref();
      }
    },
    stop() {
      if (timer !== null) clearTimeout(timer);
      timer = null;
    },
  };
}
