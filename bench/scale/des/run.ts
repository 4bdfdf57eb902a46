// The discrete-event run: the voice workload's sessions through G gateways' routers in virtual
// time, against R virtual replicas (des/replica.ts), no sockets. What runs is the router's own
// code — createRouter's route() before each request and served() after it, from the same
// identities the gateway computes (identify/) — and the simulator's engine, block pool and
// timing. What is modelled, not run:
// - the gateway's own time and the network: a constant `gatewayMs` per request;
// - the pods share pins through one in-memory store, read and written at once (Redis adds a
//   round trip and a local cache; the socket run measures that), and tell each other their
//   sessions' turns as the activity channel does, one hop late for a fresh placement and in 100 ms
//   batches otherwise (des/activity.ts);
// - each pod sees its own requests in flight, and every replica's waiting/running/KV usage from
//   a scrape every `statsIntervalMs` (the gateway's fleet.statsIntervalMs);
// - the token ratio is learnt before the first session, as the gateway's /tokenize probe does.

import { DEFAULT_IDENTITY_OPTIONS, identify } from '../../../src/identify/identity.js';
import { mulberry32 } from '../../../src/prng.js';
import { createRouter } from '../../../src/routing/router.js';
import type { LoraSlots, ReplicaView, Router, ServedOutcome } from '../../../src/routing/types.js';
import { createMemorySessionStore } from '../../../src/store/memory.js';
import { createActivityBus } from './activity.js';
import { sharePeerInflight, type PeerInflightShare } from '../../../src/fleet/peer-inflight.js';
import { ACTIVITY_FLUSH_MS } from '../../../src/store/redis-activity.js';
import { RATIO_SAMPLE } from '../../../src/fleet/token-ratio.js';
import { pushText } from '../../sim/tokenizer.js';
import type { Exchange } from '../../voice/client.js';
import { dialogueOf } from '../../voice/dialogue.js';
import type { SentRequest } from '../../voice/ideal.js';
import type { Workload } from '../../voice/workload.js';
import { createVirtualClock } from './clock.js';
import { createVirtualReplica, type VirtualAnswer } from './replica.js';
import { loadOf, replayCpuMsPerRequest, type ReplayLog } from './replay.js';

export type DesStrategy = 'affinity' | 'round-robin' | 'session-hash' | 'oracle';

export interface DesOptions {
  replicas: number;
  /** Gateway pods sharing one store; each request to one at random. Ignored by the oracle. */
  pods: number;
  strategy: DesStrategy;
  workload: Workload;
  kvBlocks: number;
  outputTokens: [number, number];
  gatewayMs: number;
  statsIntervalMs: number;
  /** Virtual time after which no new turn starts. */
  maxVirtualMs: number;
  /** Wall-clock bound: past it the run stops where it is (truncated), whatever is still open. */
  maxWallMs?: number;
  /** Also measure the routers' CPU by replaying their calls alone (des/replay.ts). */
  replay?: boolean;
  seed: number;
  /**
   * LoRA on every replica: `adapters` served from the start (--lora-modules), `maxLoras` slots,
   * `maxCpuLoras` kept on the host (a load of another costs `loadMs`). The routers see each
   * replica's adapters and its slots as of the last scrape.
   */
  lora?: { adapters: readonly string[]; maxLoras: number; maxCpuLoras: number; loadMs: number };
  /** The model each session's requests name (an adapter); absent: the simulator's base model. */
  modelOf?: (session: number) => string;
  /** The oracle's replica for a session (index); absent: session i → replica i mod R. */
  oraclePlace?: (session: number) => number;
}

export interface DesRecord {
  session: number;
  turn: number;
  step: number;
  /** Virtual ms sent → first token, as the client would see it (gatewayMs included). */
  ttftMs: number | null;
  ok: boolean;
  replica: string;
  route: string | null;
  promptTokens: number;
  cachedTokens: number;
}

export interface DesRun {
  records: DesRecord[];
  /** Aligned with records: what was sent and received, for the ideal model. */
  sent: SentRequest[];
  queries: number;
  hits: number;
  virtualMs: number;
  truncated: boolean;
  /** CPU ms the routers spent in identify(), route() and served(), per request (process CPU time). */
  routerCpuMsPerRequest: number;
  /** The same calls made again to fresh routers with no simulator in the process (des/replay.ts); null without `replay`. */
  routerReplayCpuMsPerRequest: number | null;
}

const WALL_EPOCH = Date.UTC(2026, 0, 1);

type DesView = ReplicaView & { inflight: number; peerInflight: number; waiting: number; running: number; kvUsage: number; lora: LoraSlots | null; lastScrapeAt: number | null };

function viewOf(name: string, capacityTokens: number, adapters?: ReadonlyMap<string, string>): DesView {
  return { name, weight: 1, up: true, draining: false, inflight: 0, peerInflight: 0, models: null, waiting: 0, running: 0, kvUsage: 0, kvCapacityTokens: capacityTokens, adapters, lora: null, lastScrapeAt: null };
}

export function runDes(o: DesOptions): DesRun {
  const clock = createVirtualClock();
  const lora = o.lora === undefined ? {} : { maxLoras: o.lora.maxLoras, maxCpuLoras: o.lora.maxCpuLoras, loraLoadMs: o.lora.loadMs, loraModules: Object.fromEntries(o.lora.adapters.map((a) => [a, `/adapters/${a}`])) };
  const replicas = Array.from({ length: o.replicas }, (_, i) => createVirtualReplica(clock, i, { kvBlocks: o.kvBlocks, outputTokens: { min: o.outputTokens[0], max: o.outputTokens[1] }, ...lora }));
  const adapterMap = o.lora === undefined ? undefined : new Map(o.lora.adapters.map((a) => [a, replicas[0].config.model]));
  const byName = new Map(replicas.map((r) => [r.name, r]));
  const store = createMemorySessionStore({ maxSessions: 1_000_000, ttlMs: 3_600_000 });
  // Every pod's view of the one store, with the activity channel's fleet view between them.
  const podStore = createActivityBus(store, clock);
  const ratio = (() => {
    const t: number[] = [];
    pushText(t, RATIO_SAMPLE);
    return { estimated: Math.ceil(Buffer.byteLength(RATIO_SAMPLE) / DEFAULT_IDENTITY_OPTIONS.bytesPerToken), reported: t.length };
  })();
  const makeRouter = (g: number, now: () => number, podStoreOf: (g: number) => ReturnType<typeof podStore>): Router => {
    const router: Router = createRouter(o.strategy as 'affinity' | 'round-robin' | 'session-hash', { store: podStoreOf(g), now: () => WALL_EPOCH + now(), random: mulberry32(o.seed * 31 + g) });
    router.tokenRatio(ratio.estimated, ratio.reported);
    return router;
  };
  const viewsOf = () => replicas.map((r) => viewOf(r.name, r.config.kvBlocks * r.config.blockSize, adapterMap));
  const pods = o.strategy === 'oracle' ? [] : Array.from({ length: Math.max(1, o.pods) }, (_, g) => {
    const router = makeRouter(g, () => clock.now(), podStore);
    const views = viewsOf();
    return { router, views, byName: new Map(views.map((v) => [v.name, v])) };
  });
  const log: ReplayLog | null = o.replay && pods.length > 0 ? { calls: [] } : null;
  let routesLogged = 0;
  const podRandom = mulberry32(o.workload.options.seed + 7);
  const records: DesRecord[] = [];
  const sent: SentRequest[] = [];
  let active = o.workload.sessions.length;
  // The router's own CPU, apart from the simulator's: what a gateway pod spends deciding.
  let routerCpuUs = 0;
  const timed = <T>(fn: () => T): T => {
    const c = process.cpuUsage();
    try {
      return fn();
    } finally {
      const d = process.cpuUsage(c);
      routerCpuUs += d.user + d.system;
    }
  };
  let truncated = false;

  const scrape = () => {
    for (const p of pods) {
      for (const v of p.views) {
        const r = byName.get(v.name)!;
        v.waiting = r.engine.waiting();
        v.running = r.engine.running();
        v.kvUsage = r.pool.usage();
        if (r.lora.enabled) {
          v.lora = { maxLoras: r.config.maxLoras, ...r.lora.slots() };
          v.lastScrapeAt = WALL_EPOCH + clock.now();
        }
      }
    }
    if (active > 0) clock.setTimeout(scrape, o.statsIntervalMs);
  };
  scrape();
  // Each pod's open requests told to the others every batch interval, as gateways sharing one
  // redis-server do (fleet/peer-inflight.ts in virtual time).
  const shares: PeerInflightShare[] = pods.length < 2 ? [] : pods.map((p, g) => {
    const view = podStore(g);
    return sharePeerInflight({
      store: { announceInflight: view.announceInflight!.bind(view), onPeerInflight: view.onPeerInflight!.bind(view) },
      own: () => p.views, now: () => WALL_EPOCH + clock.now(), intervalMs: ACTIVITY_FLUSH_MS,
      apply: (name, n) => { p.byName.get(name)!.peerInflight = n; },
      later: (fn, ms) => void clock.setTimeout(fn, ms),
    });
  });

  o.workload.sessions.forEach((plan, si) => {
    const group = o.workload.groups[plan.group];
    const dialogue = dialogueOf('chat', plan, group);
    const done = () => {
      if (--active === 0) for (const s of shares) s.close();
    };
    const send = (turn: number, step: number, user: string | null) => {
      const req = dialogue.next(user);
      if (o.modelOf !== undefined) req.body.model = o.modelOf(si);
      const messages = dialogue.messages.slice();
      const sentAt = clock.now();
      let replica: string;
      let route: string | null = null;
      let settle: (a: VirtualAnswer) => void = () => {};
      if (o.strategy === 'oracle') {
        replica = replicas[o.oraclePlace?.(si) ?? si % replicas.length].name;
      } else {
        const podIndex = Math.floor(podRandom() * pods.length);
        const pod = pods[podIndex];
        const routeCall = routesLogged++;
        if (log !== null) log.calls.push({ kind: 'route', pod: podIndex, at: clock.now(), body: req.body, headers: req.headers as Record<string, string>, load: loadOf(pod.views) });
        const { identity, d } = timed(() => {
          const identity = identify('chat', req.body, req.headers, DEFAULT_IDENTITY_OPTIONS);
          return { identity, d: pod.router.route({ identity, replicas: pod.views }) };
        });
        replica = d.ranked[0].name;
        route = d.reason;
        const view = pod.byName.get(replica)!;
        view.inflight++;
        settle = (a) => {
          view.inflight--;
          const outcome: ServedOutcome = { replica, result: a.error === null ? 'ok' : 'error', replicaTtftMs: a.ttftMs, promptTokens: a.promptTokens, cachedTokens: a.cachedTokens };
          if (log !== null) log.calls.push({ kind: 'served', pod: podIndex, at: clock.now(), route: routeCall, outcome });
          timed(() => pod.router.served(identity, outcome));
        };
      }
      clock.setTimeout(() => byName.get(replica)!.serve(req.body, (a) => {
        settle(a);
        const ok = a.error === null && a.ttftMs !== null;
        records.push({ session: si, turn, step, ttftMs: a.ttftMs === null ? null : a.ttftMs + o.gatewayMs, ok, replica, route, promptTokens: a.promptTokens, cachedTokens: a.cachedTokens });
        sent.push({ sentAt, messages, tools: group.tools, content: a.content, toolCall: a.toolCall, finishReason: a.finishReason });
        dialogue.settle({ content: a.content, toolCall: a.toolCall } as Exchange, ok, step);
        // The agent speaks after the tool result at once: part of the same caller turn.
        if (ok && step === 0 && a.toolCall) return send(turn, 1, null);
        if (turn + 1 >= plan.turns.length) return done();
        clock.setTimeout(() => {
          if (clock.now() > o.maxVirtualMs) {
            truncated = true;
            return done();
          }
          send(turn + 1, 0, plan.turns[turn + 1].user);
        }, plan.turns[turn].thinkMs);
      }), o.gatewayMs);
    };
    clock.setTimeout(() => send(0, 0, plan.turns[0].user), plan.startMs);
  });

  // Bounded: every session ends by the deadline plus one turn, the scrape stops with the last one,
  // and the wall-clock bound stops the loop itself.
  const wallDeadline = performance.now() + (o.maxWallMs ?? Number.POSITIVE_INFINITY);
  clock.run(Number.POSITIVE_INFINITY, () => performance.now() > wallDeadline);
  if (active > 0) truncated = true;
  let queries = 0;
  let hits = 0;
  for (const r of replicas) {
    queries += r.queries;
    hits += r.hits;
  }
  for (const r of replicas) r.engine.stop();
  // The replay's routers share one store with no activity channel between them: the channel's
  // timers run on the DES's clock, and what a decision costs is the same either way.
  const routerReplayCpuMsPerRequest = log === null ? null : replayCpuMsPerRequest(log, () => pods.map(() => viewsOf()), (g, now) => {
    const shared = createMemorySessionStore({ maxSessions: 1_000_000, ttlMs: 3_600_000 });
    return makeRouter(g, now, () => shared);
  });
  return { records, sent, queries, hits, virtualMs: clock.now(), truncated, routerCpuMsPerRequest: routerCpuUs / 1000 / Math.max(1, records.length), routerReplayCpuMsPerRequest };
}
