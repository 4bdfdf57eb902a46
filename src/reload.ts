import type { Logger } from 'pino';
import { deepFreeze } from './config/load.js';
import type { ResolvedConfig } from './config/schema.js';
import type { Metrics } from './telemetry/metrics.js';
import { tlsByOrigin, type ReplicaTls } from './upstream/agent.js';

/** Keys a reload cannot change in a running gateway: listeners, the session store, the strategy, bounds sized at start. */
const FIXED_AT_START = [
  'listen', 'admin', 'auth', 'redis', 'logging.sessionTagSecret', 'routing.strategy', 'routing.maxSessions', 'routing.sessionTtlMs',
  'routing.options.prefixMaxEntries', 'routing.options.prefixTtlMs', 'routing.options.prior',
  'routing.options.costForgetting', 'routing.options.trafficHalfLifeMs', 'responses', 'timeouts.connectMs',
  'handoff.maxTotalBytes', 'handoff.maxPromptBytes', 'warmup.maxBytes',
] as const;

type Tree = Record<string, unknown>;
const at = (c: ResolvedConfig, path: string): unknown => path.split('.').reduce<unknown>((v, k) => (v as Tree)[k], c);

/** The reloaded configuration as it applies: `next`, with every setting fixed at start kept as it runs. */
function asApplied(next: ResolvedConfig, running: ResolvedConfig): ResolvedConfig {
  const applied = structuredClone(next) as unknown as Tree;
  for (const path of FIXED_AT_START) {
    const keys = path.split('.');
    const parent = keys.slice(0, -1).reduce<Tree>((v, k) => v[k] as Tree, applied);
    parent[keys[keys.length - 1]] = at(running, path);
  }
  return deepFreeze(applied) as unknown as ResolvedConfig;
}

export interface ReloadDeps {
  readonly log: Logger;
  readonly metrics: Metrics;
  /** The TLS settings replicas connect with, by origin (read when a replica's pool is made). */
  readonly tls: Map<string, ReplicaTls>;
  /** The configuration running now. */
  running(): ResolvedConfig;
  /** Each part of the gateway takes the applied configuration in turn (its owner's own reconfigure). */
  readonly parts: readonly ((applied: ResolvedConfig) => void)[];
}

/**
 * A reloaded configuration (SIGHUP, file change), already validated, applied to every part that
 * can change at run time; settings that only apply at start keep their running values and are
 * named in a warning.
 */
export function createReload(d: ReloadDeps): (next: ResolvedConfig) => void {
  return (next) => {
    // Read first: a CA file gone since the config was loaded throws before anything is applied.
    const nextTls = tlsByOrigin(next.upstreams);
    const running = d.running();
    const fixed = FIXED_AT_START.filter((path) => JSON.stringify(at(next, path)) !== JSON.stringify(at(running, path)));
    if (fixed.length) d.log.warn({ keys: fixed }, 'config reload: these settings apply only at start; the running values stay');
    // A replica the reload adds connects with its TLS settings; one already connected keeps those
    // it connected with.
    for (const [origin, t] of nextTls) if (!d.tls.has(origin)) d.tls.set(origin, t);
    const applied = asApplied(next, running);
    for (const apply of d.parts) apply(applied);
    d.metrics.configReloads.inc({ result: 'applied' });
    d.log.warn({ replicas: next.upstreams.map((u) => u.name) }, 'config reloaded');
  };
}
