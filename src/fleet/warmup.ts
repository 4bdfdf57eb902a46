import type { Dispatcher } from 'undici';
import type { Logger } from 'pino';
import type { HomeSet } from '../routing/types.js';
import type { Metrics } from '../telemetry/metrics.js';
import type { Health } from './health.js';
import type { HotPrefix, HotPrefixes } from './hot-prefixes.js';
import type { ReplicaState } from './registry.js';
import { pool, replay } from './replay.js';

export interface WarmupOptions {
  enabled: boolean;
  topK: number;
  concurrency: number;
  timeoutMs: number;
}

/** Why a replica is warmed; bounded (warmroute_warmups_total{reason}). */
export type WarmupReason = 'join' | 'restart' | 'long_outage';

export interface Warmup {
  /** Warms the replica before it takes sessions (it is out meanwhile); resolves when it is back in. */
  warm(r: ReplicaState, reason: WarmupReason): Promise<void>;
  setOptions(o: WarmupOptions): void;
}

/**
 * Deploy warmup, the field report's advice done automatically: a replica that joins, or comes
 * back with a cold cache, is sent the K hottest shared prefixes (system prompt + tools) with
 * max_tokens 1 and bounded concurrency before it takes sessions, so the first calls of every busy
 * agent there do not each pay a cold prefill. Bounded in time: past timeoutMs it takes traffic anyway.
 *
 * Once the fleet's caches cannot hold every agent everywhere (routing says so), the K hottest of
 * the whole fleet would be prompts this replica never serves, evicted again by those it does: it
 * is sent its home set instead — the agents routing places there (routing/placement.ts) — the
 * hottest first, no more than fill × its KV capacity and K.
 */
export function createWarmup(deps: {
  agent: Dispatcher;
  /** Fires when the gateway stops: replays in flight end. */
  stopping: AbortSignal;
  hot: HotPrefixes;
  /** Routing's view of the agents a replica serves (Router.homeSet); absent: always the hottest. */
  homeSet?: (replica: string) => HomeSet;
  /** Share of a replica's KV capacity its warmup may fill under pressure (routing.options.capacityFill). */
  capacityFill?: () => number;
  health: () => Health;
  metrics: Metrics;
  log: Logger;
  options: WarmupOptions;
}): Warmup {
  const { metrics, log } = deps;
  let options = deps.options;
  const warming = new Map<string, Promise<void>>();

  /** What to send: the home set under pressure, else the fleet's hottest. */
  function choose(r: ReplicaState): { set: 'home' | 'hottest'; prefixes: HotPrefix[] } {
    const home = deps.homeSet?.(r.name);
    if (!home?.pressured) return { set: 'hottest', prefixes: deps.hot.top(options.topK) };
    const budget = (deps.capacityFill?.() ?? 1) * (r.kvCapacityTokens ?? Infinity);
    const out: HotPrefix[] = [];
    let tokens = 0;
    for (const p of deps.hot.of(home.agents)) {
      if (out.length >= options.topK || tokens + p.tokens > budget) break;
      out.push(p);
      tokens += p.tokens;
    }
    return { set: 'home', prefixes: out };
  }

  async function run(r: ReplicaState, reason: WarmupReason) {
    const { set, prefixes } = choose(r);
    if (prefixes.length === 0) {
      log.info({ replica: r.name, reason, set }, set === 'home' ? 'warmup: no home agent known for this replica, nothing to send' : 'warmup: no shared prefix seen yet, nothing to send');
      return;
    }
    r.warming = true;
    deps.health().refresh(r);
    const t0 = performance.now();
    const deadline = t0 + options.timeoutMs;
    let ok = 0;
    let failed = 0;
    let lastError: string | null = null;
    try {
      await pool(prefixes, options.concurrency, async (p) => {
        const left = deadline - performance.now();
        const res = await replay(deps.agent, r, p.target, p.body, Math.max(1, Math.floor(left)), deps.stopping);
        if (res.ok) ok++;
        else {
          failed++;
          lastError = res.error;
        }
      }, () => performance.now() >= deadline || !r.warming);
    } finally {
      r.warming = false;
      deps.health().refresh(r);
    }
    const ms = Math.round(performance.now() - t0);
    const tokens = prefixes.reduce((s, p) => s + p.tokens, 0);
    const complete = failed === 0 && ok === prefixes.length;
    metrics.warmups.inc({ reason, outcome: complete ? 'done' : 'incomplete' });
    if (!complete) log.warn({ replica: r.name, reason, set, prefixes: prefixes.length, ok, failed, tokens, ms, err: lastError }, 'warmup incomplete: the replica takes sessions anyway');
    else log.info({ replica: r.name, reason, set, prefixes: ok, tokens, ms }, 'warmup done: the replica takes sessions');
  }

  return {
    warm(r, reason) {
      if (!options.enabled || options.topK === 0) return Promise.resolve();
      const running = warming.get(r.name);
      if (running) return running;
      const p = run(r, reason).finally(() => warming.delete(r.name));
      warming.set(r.name, p);
      return p;
    },
    setOptions(o) { options = o; },
  };
}
