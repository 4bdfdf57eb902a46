import { defaultsOf } from '../config/defaults.js';
import { ConfigSchema, ResponsesSchema, STRATEGY_NAMES, type LostStateAction, type StrategyName } from '../config/schema.js';
import { errors } from '../errors.js';
import type { RequestIdentity } from '../identify/identity.js';
import { createMemorySessionStore } from '../store/memory.js';
import type { SessionStore } from '../store/types.js';
import { createBrokenSessions } from './broken-sessions.js';
import { createAdapterRecency } from './adapter-slots.js';
import { buildContext, capacityReading } from './context.js';
import { createCostModel } from './cost-model.js';
import { createDriftWatch } from './drift.js';
import { resolveRoutingOptions, type RoutingOptionsInput } from './options.js';
import { decide } from './pipeline.js';
import { createKvResidency } from './kv-residency.js';
import { createLearner } from './learner.js';
import { createPrefixIndex } from './prefix-index.js';
import { createPressureWatch } from './pressure.js';
import { compose } from './strategies.js';
import { createStoredResponses } from './stored-responses.js';
import { createTraffic } from './traffic.js';
import type { Decision, HomeSet, ResidencyObserver, RouteContext, Router, StateLostReason } from './types.js';
import { createWorkingSet } from './working-set.js';
import { underPressure } from './placement.js';

export const STRATEGIES = STRATEGY_NAMES;
export type Strategy = StrategyName;

export interface RouterDeps {
  readonly store: SessionStore;
  readonly now?: () => number;
  readonly random?: () => number;
  /** Routing knobs (the config schema documents each one and its default). Throws on nonsense. */
  readonly options?: RoutingOptionsInput;
  /** Stored responses (Responses API); the config schema's `responses` section has the defaults. */
  readonly responses?: {
    /** Response id → replica records (default: in memory, the schema's bound and TTL). */
    readonly store?: SessionStore;
    readonly onLostState?: LostStateAction;
    /** Longest wait for the shared store on a local miss (responses.fetchMs). */
    readonly fetchMs?: number;
    /** A request needing a stored response could not go to its holder (for the metric and the log). */
    readonly onStateLost?: (reason: StateLostReason, replica: string | null) => void;
  };
  /** Told what the cache beliefs get right and wrong (metrics). */
  readonly residency?: ResidencyObserver;
  /** Engine blocks tracked over every replica whose KV events are read (the config's kvEvents.maxBlocks). */
  readonly kvMaxBlocks?: number;
}

const RESPONSES_DEFAULTS = defaultsOf(ResponsesSchema);
// The schema's own default (config/schema.ts is its one source), for a router built without a config.
const KV_EVENTS_DEFAULTS = defaultsOf(ConfigSchema.properties.kvEvents);

/** How the state-lost error names the cause. */
const GONE: Record<Exclude<StateLostReason, 'unknown' | 'unconfirmed'>, string> = { down: 'is down', draining: 'is draining', removed: 'is no longer in the fleet', restarted: 'has restarted since' };

// Keyless conversations remembered for hysteresis, and sessions remembered as broken off: past
// this the oldest are forgotten first.
const MAX_REMEMBERED = 100_000;
// Message hashes the drift watch keeps over all its sessions (tens of MB at most).
const MAX_DRIFT_LINKS = 1_000_000;

/**
 * A strategy's composition (strategies.ts) run over what the router knows: session pins and
 * keyless conversations' records (the store), which replica holds which prefix (prefix index),
 * each replica's learned costs, recent traffic, the working sets, and sessions whose last
 * response broke off. Three rooms: route() builds the decision's context once (context.ts, with
 * the pressure question of pressure.ts), decides (pipeline.ts: filters, scorers, picker), and
 * hands the decision to the learner (learner.ts), which owns every update after it and after the
 * answer (served()). This file composes them and answers the fleet's questions (warmup's home
 * set, a replica lost or restarted, KV event streams).
 */
export function createRouter(strategy: Strategy, deps: RouterDeps): Router {
  const now = deps.now ?? Date.now;
  const random = deps.random ?? Math.random;
  let o = resolveRoutingOptions(deps.options);
  const { store } = deps;
  const index = createPrefixIndex({ maxEntries: o.prefixMaxEntries, ttlMs: o.prefixTtlMs });
  const cost = createCostModel(o.prior, o.costForgetting);
  const traffic = createTraffic(o.trafficHalfLifeMs);
  const broken = createBrokenSessions(MAX_REMEMBERED, o.prefixTtlMs);
  const workingSet = createWorkingSet({ windowMs: o.workingSetWindowMs, maxSessions: MAX_REMEMBERED });
  // Each replica's KV capacity as last seen by route(), for the warmup's question (homeSet).
  const capacities = new Map<string, number>();
  // The agents a replica served when its cache was lost (restart, outage): its home set to warm.
  const lostHomes = new Map<string, string[]>();
  const pressure = createPressureWatch({ workingSet, tokenScale: () => cost.tokenScale(), options: () => o });
  let composition = compose(strategy, { options: o, cost, traffic, random, workingSet });
  const drift = createDriftWatch(MAX_REMEMBERED, MAX_DRIFT_LINKS);
  const stored = createStoredResponses(deps.responses?.store ?? createMemorySessionStore({ maxSessions: RESPONSES_DEFAULTS.maxRecords, ttlMs: RESPONSES_DEFAULTS.recordTtlMs }));
  const onLostState = deps.responses?.onLostState ?? RESPONSES_DEFAULTS.onLostState;
  const fetchMs = deps.responses?.fetchMs ?? RESPONSES_DEFAULTS.fetchMs;
  // Requests whose prefetch found the shared store silent: their miss is not a known one.
  const unconfirmed = new WeakSet<RequestIdentity>();
  const observe = deps.residency;
  // Which streams are live is the residency's to say (kv-residency.ts); the index marks the links
  // matched there exact, one by one.
  const residency = createKvResidency({
    maxBlocks: deps.kvMaxBlocks ?? KV_EVENTS_DEFAULTS.maxBlocks,
    hooks: {
      lost(replica, links) {
        index.forgetLinks(replica, links);
        observe?.evicted(replica, 'events', links.length);
      },
      cleared: (replica) => index.forgetReplica(replica),
      matched: (replica, links) => index.markExact(replica, links, true),
      unmatched: (replica, links) => index.markExact(replica, links, false),
    },
  });

  const learner = createLearner({ store, index, cost, traffic, broken, workingSet, residency, stored, stateful: () => composition.stateful, observe, now });
  // Held for the working-set window: a new session of an adapter goes where its sessions are.
  const adapters = createAdapterRecency(() => Math.max(o.workingSetWindowMs, o.adapterBusyMs), () => o.trafficHalfLifeMs);
  // Every gateway's adapter requests count in this one's view of the slots: the homes, loads and
  // shares its placement reads (with one gateway's alone, N gateways mix adapters on every replica).
  store.onAdapterSent?.((s) => adapters.touch(s.replica, s.adapter, s.at, s.count));
  const contextDeps = { store, index, broken, pressure, options: () => o, capacities, capacityRead: capacityReading(), adapters };

  /**
   * A request that needs a stored response: to the replica holding it, whatever its load, as
   * `pinned` (and nowhere else: no failover down a list). If that replica is gone, an error naming
   * the cause — or, when configured, the usual decision as a `failover`. An id never seen is
   * routed as usual (the replica answers vLLM's own 404 if it does not hold it). Counted always.
   */
  function decideStateful(ctx: RouteContext, id: string): Decision {
    const at = stored.locate(id, ctx.replicas, ctx.now);
    if (at.holder !== null) return { ranked: [at.holder], reason: 'pinned', matchedTokens: at.warmTokens };
    const lost = at.lost === 'unknown' && unconfirmed.has(ctx.identity) ? 'unconfirmed' : at.lost;
    deps.responses?.onStateLost?.(lost, at.replica);
    if (lost === 'unknown' || lost === 'unconfirmed') return decide(ctx, composition);
    if (onLostState === 'error') {
      // x-should-retry: OpenAI's SDKs retry a 409 by default, and no retry can bring the state back.
      throw errors.responseStateLost([at.replica, GONE[lost]], ctx.identity.kind === 'responses' ? 'previous_response_id' : null, undefined, ['x-should-retry', 'false']);
    }
    return { ...decide(ctx, composition), reason: 'failover' };
  }

  function forgetReplica(replica: string) {
    const agents = [...workingSet.of(replica, now()).agents.keys()];
    if (agents.length > 0) lostHomes.set(replica, agents);
    workingSet.forgetReplica(replica);
    index.forgetReplica(replica);
    residency.reset(replica);
    store.forgetReplica(replica);
    traffic.forget(replica);
    adapters.forget(replica);
  }

  /**
   * The agents a replica will serve, for its warmup: those with sessions active there now, else
   * those it served before its cache was lost, else (a replica new to the fleet) those of the
   * fullest replica, the ones that spread next. Not pressured when every cache can hold every
   * active agent (or capacity is unknown): then the warmup sends the hottest prefixes.
   */
  function homeSetOf(replica: string): HomeSet {
    const t = now();
    let agentTokens = 0;
    for (const tokens of workingSet.agents(t).values()) agentTokens += tokens;
    const scale = cost.tokenScale();
    const caps = [...capacities.values()];
    const pressured = composition.learns && (pressure.recent(t) || (caps.length > 0
      && underPressure(agentTokens * scale, workingSet.meanOwnTokens(t) * workingSet.activeSessions(t) * scale, caps, o.capacityFill)));
    const own = [...workingSet.of(replica, t).agents.keys()];
    if (own.length > 0) return { pressured, agents: own };
    const lost = lostHomes.get(replica);
    if (lost !== undefined) return { pressured, agents: lost };
    let fullest: string | null = null;
    let worst = -Infinity;
    for (const [name, c] of capacities) {
      if (name === replica) continue;
      const share = workingSet.of(name, t).tokens / c;
      if (share > worst) {
        worst = share;
        fullest = name;
      }
    }
    return { pressured, agents: fullest === null ? [] : [...workingSet.of(fullest, t).agents.keys()] };
  }

  return {
    strategy,

    tokenRatio: (estimated, reported) => cost.observeTokens(estimated, reported),

    prefetch(identity) {
      const id = identity.storedResponseId;
      if (!composition.stateful || id === null) return null;
      const reading = stored.fetch(id, now(), fetchMs);
      return reading === null ? null : reading.then((confirmed) => { if (!confirmed) unconfirmed.add(identity); });
    },

    route(req) {
      const ctx = buildContext(contextDeps, req.identity, req.replicas, now(), composition.learns, req.loadable);
      const id = req.identity.storedResponseId;
      const decided = composition.stateful && id !== null ? decideStateful(ctx, id) : decide(ctx, composition);
      const key = req.identity.sessionKey ?? req.identity.conversationKey;
      const drifted = key === null ? null : drift.observe(key, req.identity, ctx.now);
      const withDrift = drifted === null ? decided : { ...decided, drift: drifted };
      const d = ctx.adapters === undefined ? withDrift : { ...withDrift, adapterSlot: ctx.adapters.slot(withDrift.ranked[0]) };
      if (composition.learns) {
        learner.routed(ctx, d);
        if (ctx.adapters !== undefined) {
          adapters.touch(d.ranked[0].name, ctx.adapters.adapter, ctx.now);
          // A placement or a move changes where the adapter is at home: the other gateways hear it at once.
          store.announceAdapter?.({ replica: d.ranked[0].name, adapter: ctx.adapters.adapter, count: 1, at: ctx.now }, d.reason !== 'pinned' && d.reason !== 'prefix');
        }
      }
      return d;
    },

    // `identity` must be the object route() was given: what route() saw of each replica (warm
    // tokens, queue) is looked up by it for the cost model.
    served(identity, outcome) {
      if (composition.learns) learner.served(identity, outcome);
    },

    session(key) {
      const t = now();
      const info = store.get(key, t);
      if (info === null) return null;
      // Past the prefix TTL the replica has most likely evicted the conversation: nothing is warm.
      return t - info.lastSeen > o.prefixTtlMs ? { ...info, warmTokens: 0 } : info;
    },
    unpin: (key) => store.unpin(key),
    lastDrift: (key) => drift.last(key),
    storedResponse: (id) => stored.get(id, now()),
    setOptions(input) {
      // What was learned stays; the prefix index's bounds and the cost model's prior are fixed at start.
      o = resolveRoutingOptions(input);
      workingSet.setWindow(o.workingSetWindowMs);
      composition = compose(strategy, { options: o, cost, traffic, random, workingSet });
    },
    pinsByReplica: () => store.countsByReplica(now()),
    adapterSentAt: (replica, adapter) => adapters.lastSent(replica, adapter),
    forgetReplica,
    replicaRestarted(replica, since) {
      forgetReplica(replica);
      stored.restarted(replica, since);
    },
    homeSet(replica) {
      return homeSetOf(replica);
    },
    replicaLeft(replica) {
      forgetReplica(replica);
      residency.remove(replica);
      index.removeReplica(replica);
      capacities.delete(replica);
      lostHomes.delete(replica);
      stored.left(replica);
      cost.remove(replica);
    },
    stats: () => ({
      prefixEntries: index.size(),
      prefixTokensByReplica: index.tokensByReplica(),
      costByReplica: cost.snapshot(),
      tokenScale: cost.tokenScale(),
      responseRecords: stored.size(),
      retentionByReplica: new Map([...new Set([...index.tokensByReplica().keys(), ...residency.replicas()])].map((r) => [r, index.retentionMs(r)])),
      kvBlocksByReplica: new Map(residency.replicas().map((r) => [r, residency.stats(r) as { blocks: number; links: number }])),
      workingSetTokensByReplica: new Map([...capacities.keys()].map((name) => [name, workingSet.of(name, now()).tokens * cost.tokenScale()])),
    }),
    kvEvents(replica, events, rank = 0) {
      if (!composition.learns) return;
      residency.apply(replica, events, now(), rank);
    },
    kvStream(replica, state, rank = 0) {
      if (state === 'lost') {
        // Removals may have gone by unseen: the links matched there are forgotten, not trusted.
        index.forgetLinks(replica, residency.setLive(replica, rank, false));
        return;
      }
      if (state === 'restarted') {
        residency.reset(replica, rank);
        index.forgetReplica(replica);
      }
      residency.setLive(replica, rank, true);
    },
  };
}
