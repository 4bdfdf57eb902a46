import { defaultsOf } from '../config/defaults.js';
import { ConfigSchema, ResponsesSchema, STRATEGY_NAMES, type LostStateAction, type StrategyName } from '../config/schema.js';
import { errors } from '../errors.js';
import type { RequestIdentity } from '../identify/identity.js';
import { createMemorySessionStore } from '../store/memory.js';
import { CONVERSATION_KEY, type SessionInfo, type SessionStore } from '../store/types.js';
import { createBrokenSessions } from './broken-sessions.js';
import { createCostModel } from './cost-model.js';
import { createDriftWatch } from './drift.js';
import { runningOf } from './load.js';
import { resolveRoutingOptions, type RoutingOptionsInput } from './options.js';
import { decide } from './pipeline.js';
import { createKvResidency } from './kv-residency.js';
import { createPrefixIndex } from './prefix-index.js';
import { compose } from './strategies.js';
import { createStoredResponses } from './stored-responses.js';
import { createTraffic } from './traffic.js';
import type { Decision, HomeSet, ResidencyObserver, RouteContext, Router, StateLostReason } from './types.js';
import { agentOf, createWorkingSet } from './working-set.js';
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
  /** Engine blocks tracked per replica whose KV events are read (the config's kvEvents.maxBlocksPerReplica). */
  readonly kvMaxBlocks?: number;
}

/**
 * A replica served fewer cached tokens than predicted by more than this share (or 4 blocks, the
 * estimate's own error on a short prompt): it evicted.
 */
const EVICTION_SLACK = 0.1;
const EVICTION_SLACK_TOKENS = 64;
// A response can end before the KV events of its prefill arrive (a 1-token answer): the mapping
// to engine blocks is learnt a little later.
const LEARN_DELAY_MS = 100;

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

/** What route() saw of each candidate, kept until served() feeds the cost model. */
interface Seen {
  readonly matched: number;
  readonly waiting: number;
  readonly running: number;
}

const NOTHING_WARM: ReadonlyMap<string, number> = new Map();

/**
 * A strategy's composition (strategies.ts) run over what the router knows: session pins and
 * keyless conversations' records (the store), which replica holds which prefix (prefix index),
 * each replica's learned costs, recent traffic, and sessions whose last response broke off.
 * route() looks these up once into a RouteContext for the filters, scorers and picker; served()
 * is where they are learned.
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
  const pressure = { at: -Infinity };
  let composition = compose(strategy, { options: o, cost, traffic, random, workingSet, pressure });
  const drift = createDriftWatch(MAX_REMEMBERED, MAX_DRIFT_LINKS);
  const seen = new WeakMap<RequestIdentity, Map<string, Seen>>();
  const stored = createStoredResponses(deps.responses?.store ?? createMemorySessionStore({ maxSessions: RESPONSES_DEFAULTS.maxRecords, ttlMs: RESPONSES_DEFAULTS.recordTtlMs }));
  const onLostState = deps.responses?.onLostState ?? RESPONSES_DEFAULTS.onLostState;
  const fetchMs = deps.responses?.fetchMs ?? RESPONSES_DEFAULTS.fetchMs;
  // Requests whose prefetch found the shared store silent: their miss is not a known one.
  const unconfirmed = new WeakSet<RequestIdentity>();
  const observe = deps.residency;
  /** Replicas whose KV event stream is live: exact residency, no feedback guesses. */
  const live = new Set<string>();
  const routedAt = new WeakMap<RequestIdentity, number>();
  const residency = createKvResidency({
    maxBlocks: deps.kvMaxBlocks ?? KV_EVENTS_DEFAULTS.maxBlocksPerReplica,
    hooks: {
      lost(replica, links) {
        index.forgetLinks(replica, links);
        observe?.evicted(replica, 'events', links.length);
      },
      cleared: (replica) => index.forgetReplica(replica),
    },
  });

  // Every gateway's sessions count in this one's working sets: the turns other gateways serve
  // arrive through the shared store (at most its batch interval late), this gateway's go out by it.
  store.onTurn?.((turn) => workingSet.heard(turn.key, turn.replica, turn.agent === null ? null : { key: turn.agent, tokens: turn.agentTokens }, turn.promptTokens, turn.at, turn.replaces));
  function touch(key: string, replica: string, identity: RequestIdentity, t: number, fresh: boolean, replaces?: string): void {
    const agent = agentOf(identity);
    workingSet.touch(key, replica, agent, identity.promptTokens, t, replaces);
    store.announce?.({ key, replica, agent: agent?.key ?? null, agentTokens: agent?.tokens ?? 0, promptTokens: identity.promptTokens, at: t, ...(replaces === undefined ? {} : { replaces }) }, fresh);
  }

  /**
   * A keyless conversation's record: its own (conversation key), else — at its first turn under
   * that key — the record of its opening turn (placement key), shared by every caller who opened
   * with the same words: its replica holds this conversation's first turn warm whichever of them
   * it served (those turns were the same prompt), and its `since` is when that prompt came there.
   */
  function conversationOf(identity: RequestIdentity, t: number): { record: SessionInfo | null; opening: SessionInfo | null } {
    if (identity.sessionKey !== null || identity.conversationKey === null) return { record: null, opening: null };
    const own = store.get(CONVERSATION_KEY + identity.conversationKey, t);
    if (own !== null || identity.placementKey === null || identity.placementKey === identity.conversationKey) return { record: own, opening: null };
    const opening = store.get(CONVERSATION_KEY + identity.placementKey, t);
    return { record: opening, opening };
  }

  /** Cached-token feedback: what the index predicted there against what the replica served. */
  function feedback(identity: RequestIdentity, replica: string, matched: number, cachedTokens: number, t: number): void {
    const scale = cost.tokenScale();
    const predicted = Math.min(matched, identity.promptTokens) * scale;
    observe?.cachedTokens(replica, Math.round(predicted), cachedTokens);
    if (live.has(replica)) return; // its events already say exactly what it evicted
    if (cachedTokens + Math.max(EVICTION_SLACK_TOKENS, EVICTION_SLACK * predicted) < predicted) {
      const age = index.evicted(replica, identity.chain, identity.chainTokens, cachedTokens / scale, t);
      if (age !== null) observe?.evicted(replica, 'feedback', 1);
    } else if (cachedTokens > 0) {
      index.kept(replica, identity.chain, identity.chainTokens, cachedTokens / scale, t);
    }
  }

  function learnBlocks(identity: RequestIdentity, replica: string, promptTokens: number): void {
    const sentAt = routedAt.get(identity);
    if (sentAt === undefined) return;
    setTimeout(() => {
      if (!live.has(replica)) return;
      observe?.learned(replica, residency.learn(replica, identity.chain, identity.chainTokens, promptTokens, sentAt).reason);
    }, LEARN_DELAY_MS).unref();
  }

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

  function context(identity: RequestIdentity, replicas: RouteContext['replicas'], t: number): RouteContext {
    const pin = identity.sessionKey === null ? null : store.get(identity.sessionKey, t);
    if (!composition.learns) return { identity, replicas, now: t, pin, warm: NOTHING_WARM, avoid: null };
    // Capacity is in the replica's tokens, the index counts estimated ones: close enough for a
    // bound whose job is to forget the oldest links once a replica has surely evicted them.
    for (const r of replicas) {
      index.setCapacity(r.name, r.kvCapacityTokens);
      if (r.kvCapacityTokens !== null && r.kvCapacityTokens > 0) capacities.set(r.name, r.kvCapacityTokens);
    }
    const warm = identity.chain.length > 0 ? index.match(identity.chain, identity.chainTokens, t) : new Map<string, number>();
    // A pin may come from another gateway through a shared store, unknown to this index: its
    // recorded warm prefix counts while the replica would still hold it.
    if (pin !== null && t - pin.lastSeen <= o.prefixTtlMs) {
      const w = Math.min(pin.warmTokens, identity.promptTokens);
      if (w > (warm.get(pin.replica) ?? 0)) warm.set(pin.replica, w);
    }
    const conversation = conversationOf(identity, t).record;
    // Its warm prefix there counts too, as a pin's does. The pin is only rewritten when the
    // conversation moves, so its recorded prefix is that of the turn that placed it; the replica
    // that served the last turn holds that turn's prompt: all but the answer and the new message.
    if (conversation !== null && t - conversation.lastSeen <= o.prefixTtlMs) {
      const ct = identity.chainTokens;
      const previous = ct.length >= 3 ? ct[ct.length - 3] : 0;
      const w = Math.min(Math.max(conversation.warmTokens, previous), identity.promptTokens);
      if (w > (warm.get(conversation.replica) ?? 0)) warm.set(conversation.replica, w);
    }
    return { identity, replicas, now: t, pin, warm, avoid: broken.avoid(identity.sessionKey ?? identity.conversationKey, t), conversation };
  }

  function forgetReplica(replica: string) {
    const agents = [...workingSet.of(replica, now()).agents.keys()];
    if (agents.length > 0) lostHomes.set(replica, agents);
    workingSet.forgetReplica(replica);
    index.forgetReplica(replica);
    residency.reset(replica);
    store.forgetReplica(replica);
    traffic.forget(replica);
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
    const pressured = composition.learns && (t - pressure.at <= o.workingSetWindowMs || (caps.length > 0
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
      const ctx = context(req.identity, req.replicas, now());
      const id = req.identity.storedResponseId;
      const decided = composition.stateful && id !== null ? decideStateful(ctx, id) : decide(ctx, composition);
      const key = req.identity.sessionKey ?? req.identity.conversationKey;
      const drifted = key === null ? null : drift.observe(key, req.identity, ctx.now);
      const d = drifted === null ? decided : { ...decided, drift: drifted };
      // A fresh placement counts in its replica's working set at once: sessions starting together
      // must see each other before any of them is served.
      if (composition.learns && key !== null && (d.reason === 'placed' || d.reason === 'capacity' || (d.reason === 'spill' && req.identity.sessionKey === null && ctx.pin === null))) {
        touch(key, d.ranked[0].name, req.identity, ctx.now, true);
      }
      if (composition.learns) {
        const notes = new Map<string, Seen>();
        for (const r of d.ranked) notes.set(r.name, { matched: ctx.warm.get(r.name) ?? 0, waiting: r.waiting, running: runningOf(r) });
        seen.set(req.identity, notes);
        routedAt.set(req.identity, ctx.now);
      }
      return d;
    },

    // `identity` must be the object route() was given: what route() saw of each replica (warm
    // tokens, queue) is looked up by it for the cost model.
    served(identity, outcome) {
      if (!composition.learns) return;
      const t = now();
      const key = identity.sessionKey ?? identity.conversationKey;
      if (outcome.result === 'interrupted') {
        broken.broke(key, outcome.replica, t);
        return;
      }
      if (outcome.result !== 'ok') return;
      if (composition.stateful && identity.storesResponse && outcome.responseId) {
        stored.served(outcome.responseId, outcome.replica, outcome.promptTokens ?? identity.promptTokens, t);
      }
      broken.healed(key);
      const s = seen.get(identity)?.get(outcome.replica);
      if (outcome.cachedTokens !== null && s !== undefined) feedback(identity, outcome.replica, s.matched, outcome.cachedTokens, t);
      // In the gateway's estimated tokens, like the agent's prompt: placement scales both to the replica's.
      // A keyless conversation's first turn under its own key: it was counted (and recorded) under
      // its opening's key until now.
      const opening = identity.sessionKey === null ? conversationOf(identity, t).opening : null;
      if (key !== null) touch(key, outcome.replica, identity, t, false, opening === null ? undefined : identity.placementKey ?? undefined);
      index.record(identity.chain, identity.chainTokens, outcome.replica, t);
      if (outcome.promptTokens !== null && live.has(outcome.replica)) learnBlocks(identity, outcome.replica, outcome.promptTokens);
      traffic.served(outcome.replica, t);
      if (identity.sessionKey !== null) store.pin(identity.sessionKey, outcome.replica, identity.promptTokens, t);
      else if (identity.conversationKey !== null) {
        // Shared (through a shared store) so that another gateway serving the next turn finds it;
        // still on its opening's replica, it keeps the time it came there (the cooldown's start).
        store.pin(CONVERSATION_KEY + identity.conversationKey, outcome.replica, identity.promptTokens, t, opening !== null && opening.replica === outcome.replica ? opening.since : undefined);
      }
      if (outcome.promptTokens !== null) cost.observeTokens(identity.promptTokens, outcome.promptTokens);
      if (outcome.replicaTtftMs === null) return;
      const exact = outcome.promptTokens !== null && outcome.cachedTokens !== null;
      const uncached = exact
        ? (outcome.promptTokens as number) - (outcome.cachedTokens as number)
        : identity.promptTokens - (s?.matched ?? 0);
      cost.observe(outcome.replica, uncached, exact, s?.waiting ?? 0, s?.running ?? 0, outcome.replicaTtftMs);
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
      composition = compose(strategy, { options: o, cost, traffic, random, workingSet, pressure });
    },
    pinsByReplica: () => store.countsByReplica(now()),
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
      live.delete(replica);
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
    kvEvents(replica, events) {
      if (!composition.learns) return;
      residency.apply(replica, events, now());
    },
    kvStream(replica, state) {
      if (state === 'lost') {
        if (!live.delete(replica)) return;
        index.setExact(replica, false);
        // Removals may have gone by unseen: what is mapped can no longer be trusted.
        residency.reset(replica);
        return;
      }
      if (state === 'restarted') {
        residency.reset(replica);
        index.forgetReplica(replica);
      }
      live.add(replica);
      index.setExact(replica, true);
    },
  };
}
