import type { Dispatcher } from 'undici';
import type { Logger } from 'pino';
import type { Router } from '../routing/types.js';
import type { SessionStore } from '../store/types.js';
import type { Metrics } from '../telemetry/metrics.js';
import type { LastPrompts } from './last-prompts.js';
import type { DrainProgress, Registry, ReplicaState } from './registry.js';
import { oneTokenBody, pool, replay } from './replay.js';

export interface HandoffOptions {
  enabled: boolean;
  concurrency: number;
  timeoutMs: number;
}

/** How one pinned session left a draining replica; bounded (warmroute_handoffs_total{outcome}). */
export type HandoffOutcome = 'warmed' | 'cold' | 'failed' | 'no_target';

export interface Drains {
  /**
   * Starts a drain (no-op if it is draining already); false if there is no such replica.
   * `handoff` false: no warm handoff from here (another gateway started the drain and hands off).
   */
  drain(name: string, cause?: string, handoff?: boolean): boolean;
  /** Resolves once the drain's handoffs are over (at once if none runs). */
  settled(name: string): Promise<void>;
  undrain(name: string): boolean;
  /**
   * A keyed session's request that was in flight on a draining replica has just ended there (and
   * re-pinned the session to it): hand it off too, with the prompt it just sent.
   */
  servedWhileDraining(name: string, key: string): void;
  setOptions(o: HandoffOptions): void;
}

/**
 * Drain with warm handoff. The replica takes no new sessions (the healthy filter skips draining
 * replicas) while its in-flight streams finish. Each session pinned there is moved to its next
 * choice — the router's decision with the replica gone — and, before the pin moves, its last
 * prompt is replayed there with max_tokens 1, so its next turn finds the prefix cache warm instead
 * of re-prefilling. A session with nothing to replay (or handoff off, or a failed replay) keeps
 * its pin and fails over cold on its next turn, as a pin on a lost replica always does.
 */
export function createDrains(deps: {
  registry: Registry;
  router: Router;
  store: SessionStore;
  lastPrompts: LastPrompts | null;
  agent: Dispatcher;
  /** Fires when the gateway stops: replays in flight end. */
  stopping: AbortSignal;
  metrics: Metrics;
  log: Logger;
  options: HandoffOptions;
}): Drains {
  const { registry, router, store, metrics, log } = deps;
  let options = deps.options;
  const running = new Map<string, Promise<void>>();
  for (const o of ['warmed', 'cold', 'failed', 'no_target'] as const) metrics.handoffs.inc({ outcome: o }, 0);

  function count(p: DrainProgress, outcome: HandoffOutcome) {
    metrics.handoffs.inc({ outcome });
    p.pending--;
    if (outcome === 'warmed') p.warmed++;
    else if (outcome === 'failed') p.failed++;
    else if (outcome === 'no_target') p.noTarget++;
    else p.movedCold++;
  }

  async function handOff(r: ReplicaState, p: DrainProgress, key: string): Promise<void> {
    const last = p.handoff ? deps.lastPrompts?.get(key) : undefined;
    if (last === undefined) return count(p, 'cold');
    let target;
    try {
      target = router.route({ identity: last.identity, replicas: registry.views }).ranked[0];
    } catch (e) {
      // No replica to take it (none healthy, or none serving its model): counted, and named once
      // per drain in its summary line.
      p.firstError ??= (e as Error).message;
      return count(p, 'no_target');
    }
    const to = registry.byName(target.name);
    if (to === undefined || to === r) return count(p, 'no_target');
    let body: Buffer;
    try {
      body = oneTokenBody(JSON.parse(last.body.toString('utf8')) as Record<string, unknown>);
    } catch (e) {
      p.firstError ??= `the last prompt could not be read back: ${(e as Error).message}`;
      return count(p, 'failed');
    }
    const res = await replay(deps.agent, to, last.target, body, options.timeoutMs, deps.stopping);
    if (!r.draining || r.drain !== p) return; // undrained meanwhile: the pin stays
    if (!res.ok) {
      log.warn({ replica: r.name, to: to.name, err: res.error }, 'handoff replay failed: the session moves cold');
      return count(p, 'failed');
    }
    // The pin moves (and the prefix index learns the prompt is warm there) only now.
    router.served(last.identity, { replica: to.name, result: 'ok', replicaTtftMs: null, promptTokens: null, cachedTokens: null });
    count(p, 'warmed');
  }

  async function run(r: ReplicaState, p: DrainProgress) {
    const keys = store.keysOn(r.name, Date.now());
    p.sessions = keys.length;
    p.pending = keys.length;
    const t0 = performance.now();
    await pool(keys, options.concurrency, (k) => handOff(r, p, k), () => r.drain !== p);
    p.finishedAt = Date.now();
    log.warn({ replica: r.name, cause: p.cause, sessions: p.sessions, warmed: p.warmed, cold: p.movedCold, failed: p.failed, noTarget: p.noTarget, err: p.firstError ?? undefined, ms: Math.round(performance.now() - t0) }, 'drain: pinned sessions handed off');
  }

  return {
    drain(name, cause = 'admin', handoff = true) {
      const r = registry.byName(name);
      if (r === undefined) return false;
      if (r.draining) return true;
      r.draining = true;
      metrics.fleetChanges.inc({ change: 'drain' });
      const p: DrainProgress = { startedAt: Date.now(), cause, handoff: handoff && options.enabled && deps.lastPrompts !== null, sessions: 0, warmed: 0, movedCold: 0, failed: 0, noTarget: 0, pending: 0, finishedAt: null, firstError: null };
      r.drain = p;
      log.warn({ replica: name, cause, handoff: p.handoff, inflight: r.inflight }, 'drain: no new sessions; in-flight streams finish; pinned sessions move');
      const done = run(r, p).finally(() => { if (running.get(name) === done) running.delete(name); });
      running.set(name, done);
      return true;
    },
    settled: (name) => running.get(name) ?? Promise.resolve(),
    undrain(name) {
      const r = registry.byName(name);
      if (r === undefined) return false;
      if (!r.draining) return true;
      r.draining = false;
      if (r.drain && r.drain.finishedAt === null) r.drain.finishedAt = Date.now();
      r.drain = null;
      log.warn({ replica: name }, 'undrain: the replica takes new sessions again');
      return true;
    },
    servedWhileDraining(name, key) {
      const r = registry.byName(name);
      const p = r?.drain;
      if (r === undefined || !r.draining || !p) return;
      p.sessions++;
      p.pending++;
      p.finishedAt = null;
      const done = handOff(r, p, key).finally(() => { if (p.pending === 0) p.finishedAt = Date.now(); });
      const before = running.get(name) ?? Promise.resolve();
      running.set(name, Promise.all([before, done]).then(() => {}));
    },
    setOptions(o) { options = o; },
  };
}
