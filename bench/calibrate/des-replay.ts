// A recorded trace through the router's own code in virtual time: the same requests at the same
// times, each identified as the gateway identifies it (identify/: a completion by its token ids, a
// chat request by its recorded messages), routed by createRouter's
// route(), served by the simulator's engine and block pool on replicas of the trace's capacities,
// and reported back with served(); with `kvEvents`, every block the simulated pools store or
// evict reaches the router as vLLM's KV events do, a few ms later. What is modelled, not run: the
// gateway's own time and the network (a constant per request), the replicas' /metrics scrape (every
// `statsIntervalMs`). It decides like the socket run (closed-replay.ts) in seconds instead of the
// trace's minutes, so placement can be tried on recorded workloads and tested in `npm test`.

import { DEFAULT_IDENTITY_OPTIONS, identify } from '../../src/identify/identity.js';
import { mulberry32 } from '../../src/prng.js';
import type { RoutingOptionsInput } from '../../src/routing/options.js';
import type { KvEvent } from '../../src/routing/kv-event-types.js';
import { createRouter } from '../../src/routing/router.js';
import type { ReplicaView } from '../../src/routing/types.js';
import { createMemorySessionStore } from '../../src/store/memory.js';
import { createVirtualClock } from '../scale/des/clock.js';
import { resolveConfig, type TimingKnobs } from '../sim/config.js';
import { createEngine } from '../sim/engine.js';
import { createBlockPool, type KvModel } from '../sim/kv-cache.js';
import { serveRecorded, traceReplicaOptions } from './engine-replay.js';
import { createSglangModel } from './sglang-model.js';
import { hitRate, type Trace } from './trace.js';

export interface DesReplayOptions {
  /** A warmroute strategy, or `sglang-model`: SGLang's cache_aware policy (sglang-model.ts). */
  strategy: 'affinity' | 'round-robin' | 'session-hash' | 'sglang-model';
  timing: Readonly<TimingKnobs>;
  kvModel: KvModel;
  kvEvents: boolean;
  gatewayMs?: number;
  statsIntervalMs?: number;
  /** Publish → router lag of KV events. */
  kvLagMs?: number;
  seed?: number;
  /** Routing knobs, as the config's routing.options (the schema's defaults otherwise). */
  options?: RoutingOptionsInput;
}

export interface DesReplayResult {
  hitRate: number;
  cached: (number | null)[];
  /** Per request: virtual ms from its send to its first token (null: not served). */
  ttftMs: (number | null)[];
  replicas: number[];
  routes: Record<string, number>;
}

const WALL_EPOCH = Date.UTC(2026, 0, 1);
const MODEL = 'replay-model';
const hex = (h: number) => Math.floor(h).toString(16);

type View = { -readonly [K in keyof ReplicaView]: ReplicaView[K] };

export function desReplay(trace: Trace, o: DesReplayOptions): DesReplayResult {
  const clock = createVirtualClock();
  const gatewayMs = o.gatewayMs ?? 1;
  const sglang = o.strategy === 'sglang-model' ? createSglangModel(trace.replicas.length) : null;
  const router = createRouter(o.strategy === 'sglang-model' ? 'round-robin' : o.strategy, { store: createMemorySessionStore({ maxSessions: 100_000, ttlMs: 3_600_000 }), now: () => WALL_EPOCH + clock.now(), random: mulberry32(o.seed ?? 1), options: o.options });
  // Completions go as token ids, which the gateway counts exactly. Chat goes as the recorded
  // messages, whose tokens the gateway estimates from their bytes: the ratio to the served model's
  // is learnt before the first request, as the gateway's /tokenize probe does.
  const firstChat = trace.requests.find((r) => r.messages !== undefined);
  if (firstChat) router.tokenRatio(identify('chat', { model: MODEL, messages: firstChat.messages }, {}, DEFAULT_IDENTITY_OPTIONS).promptTokens, firstChat.promptIds.length);
  else router.tokenRatio(1, 1);
  // The gateway names a replica by its URL's host:port, and hash placements (the session-hash
  // ring, rendezvous) depend on the names: the recorded run's names give the recorded choices.
  const names = trace.replicas.map((u, i) => { try { return new URL(u).host; } catch { return `replica-${i}`; } });
  const replicas = names.map((name, i) => {
    const cfg = resolveConfig(traceReplicaOptions(trace, { timing: o.timing, kvModel: o.kvModel, name, model: MODEL }), i);
    let batch: KvEvent[] = [];
    const publish = (e: KvEvent) => {
      if (!o.kvEvents) return;
      if (batch.length === 0) clock.setTimeout(() => { const b = batch; batch = []; router.kvEvents(name, b); }, o.kvLagMs ?? 5);
      batch.push(e);
    };
    const pool = createBlockPool(cfg.kvBlocks, {
      stored: (hash, parent, tokens, blockSize) => publish({ type: 'stored', hashes: [hex(hash)], parent: parent === null ? null : hex(parent), tokenCount: tokens.length, blockSize, medium: 'GPU' }),
      removed: (hash) => publish({ type: 'removed', hashes: [hex(hash)], medium: 'GPU' }),
      cleared: () => publish({ type: 'cleared' }),
    }, cfg.blockSize, cfg.kvModel);
    const engine = createEngine(cfg, pool, { onAdmit() {}, onFirstToken() {}, onToken() {}, onFinish() {}, onPreempt() {} }, clock);
    const view: View = { name, weight: 1, up: true, draining: false, inflight: 0, models: null, waiting: 0, running: 0, kvUsage: 0, kvCapacityTokens: (cfg.kvBlocks - 1) * cfg.blockSize };
    return { cfg, pool, engine, view };
  });
  if (o.kvEvents) for (const name of names) router.kvStream(name, 'live');
  const views = replicas.map((r) => r.view);
  let pending = trace.requests.filter((r) => r.cachedTokens !== null).length;
  const scrape = () => {
    for (const r of replicas) {
      r.view.waiting = r.engine.waiting();
      r.view.running = r.engine.running();
      r.view.kvUsage = r.pool.usage();
    }
    if (pending > 0) clock.setTimeout(scrape, o.statsIntervalMs ?? 1000);
  };
  scrape();

  const cached: (number | null)[] = trace.requests.map(() => null);
  const ttfts: (number | null)[] = trace.requests.map(() => null);
  const chosen: number[] = trace.requests.map(() => -1);
  const routes: Record<string, number> = {};
  trace.requests.forEach((r, k) => {
    if (r.cachedTokens === null) return;
    clock.setTimeout(() => {
      const headers: Record<string, string> = r.sessionKey !== undefined ? { 'x-session-id': r.sessionKey } : r.group.startsWith('s') ? { 'x-session-id': `replay-${r.group}` } : {};
      const outTokens = Math.max(1, r.outputIds.length);
      const identity = r.messages !== undefined
        ? identify('chat', { model: MODEL, messages: r.messages, max_tokens: outTokens, stream: true }, headers, DEFAULT_IDENTITY_OPTIONS)
        : identify('completion', { model: MODEL, prompt: r.promptIds, max_tokens: outTokens, ignore_eos: true, stream: true }, headers, DEFAULT_IDENTITY_OPTIONS);
      let i: number;
      if (sglang) {
        i = sglang.route(r.promptIds);
        routes['sglang'] = (routes['sglang'] ?? 0) + 1;
      } else {
        const d = router.route({ identity, replicas: views });
        i = names.indexOf(d.ranked[0].name);
        routes[d.reason] = (routes[d.reason] ?? 0) + 1;
      }
      chosen[k] = i;
      const rep = replicas[i];
      rep.view.inflight++;
      const sent = clock.now();
      clock.setTimeout(() => {
        let ttft: number | null = null;
        serveRecorded(clock, rep.cfg, rep.engine, r, `d${k}`, {
          first(got) {
            ttft = clock.now() - sent;
            ttfts[k] = ttft + gatewayMs;
            cached[k] = got;
          },
          done() {
            rep.view.inflight--;
            pending--;
            sglang?.done(i);
            router.served(identity, { replica: rep.view.name, result: 'ok', replicaTtftMs: ttft, promptTokens: r.promptIds.length, cachedTokens: cached[k] });
          },
        });
      }, gatewayMs);
    }, r.atMs);
  });
  clock.run(Number.POSITIVE_INFINITY);
  return { hitRate: hitRate(trace.requests.map((r, k) => ({ promptIds: r.promptIds, cachedTokens: cached[k] }))), cached, ttftMs: ttfts, replicas: chosen, routes };
}
