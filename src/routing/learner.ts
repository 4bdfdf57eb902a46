import type { RequestIdentity } from '../identify/identity.js';
import { CONVERSATION_KEY, type SessionStore } from '../store/types.js';
import type { BrokenSessions } from './broken-sessions.js';
import { conversationOf } from './context.js';
import type { CostModel } from './cost-model.js';
import type { KvResidency } from './kv-residency.js';
import { runningOf } from './load.js';
import type { PrefixIndex } from './prefix-index.js';
import type { StoredResponses } from './stored-responses.js';
import type { Traffic } from './traffic.js';
import type { Decision, ResidencyObserver, RouteContext, ServedOutcome } from './types.js';
import { agentOf, type WorkingSet } from './working-set.js';

/**
 * A replica served fewer cached tokens than predicted by more than this share (or 4 blocks, the
 * estimate's own error on a short prompt): it evicted.
 */
const EVICTION_SLACK = 0.1;
const EVICTION_SLACK_TOKENS = 64;
// A response can end before the KV events of its prefill arrive (a 1-token answer): the mapping
// to engine blocks is learnt a little later.
const LEARN_DELAY_MS = 100;

/** What route() saw of each candidate, kept until served() feeds the cost model. */
interface Seen {
  readonly matched: number;
  readonly waiting: number;
  readonly running: number;
}

export interface LearnerDeps {
  readonly store: SessionStore;
  readonly index: PrefixIndex;
  readonly cost: CostModel;
  readonly traffic: Traffic;
  readonly broken: BrokenSessions;
  readonly workingSet: WorkingSet;
  readonly residency: KvResidency;
  readonly stored: StoredResponses;
  readonly stateful: () => boolean;
  readonly observe?: ResidencyObserver;
  readonly now: () => number;
}

export interface Learner {
  /** A decision was made: what it saw of each replica is kept for the answer; a fresh placement counts at once. */
  routed(ctx: RouteContext, d: Decision): void;
  /** The answer: every update after it (pins, index, working set, residency, traffic, cost model). */
  served(identity: RequestIdentity, outcome: ServedOutcome): void;
}

/** The one place where what the router believes changes after a decision and after its answer. */
export function createLearner(d: LearnerDeps): Learner {
  const { store, index, cost, workingSet, observe } = d;
  const seen = new WeakMap<RequestIdentity, Map<string, Seen>>();
  const routedAt = new WeakMap<RequestIdentity, number>();
  // The links a request's route put in the index before it was served: taken back when it is
  // not served there, so that a failed attempt leaves no belief behind. Released by served().
  const believed = new WeakMap<RequestIdentity, { replica: string; added: string[] }>();

  // Every gateway's sessions count in this one's working sets: the turns other gateways serve
  // arrive through the shared store (at most its batch interval late), this gateway's go out by it.
  store.onTurn?.((turn) => workingSet.heard(turn.key, turn.replica, turn.agent === null ? null : { key: turn.agent, tokens: turn.agentTokens }, turn.promptTokens, turn.at, turn.replaces));
  function touch(key: string, replica: string, identity: RequestIdentity, t: number, fresh: boolean, replaces?: string): void {
    const agent = agentOf(identity);
    workingSet.touch(key, replica, agent, identity.promptTokens, t, replaces);
    store.announce?.({ key, replica, agent: agent?.key ?? null, agentTokens: agent?.tokens ?? 0, promptTokens: identity.promptTokens, at: t, ...(replaces === undefined ? {} : { replaces }) }, fresh);
  }

  /** Cached-token feedback: what the index predicted there against what the replica served. */
  function feedback(identity: RequestIdentity, replica: string, matched: number, cachedTokens: number, t: number): void {
    const scale = cost.tokenScale();
    const predicted = Math.min(matched, identity.promptTokens) * scale;
    observe?.cachedTokens(replica, Math.round(predicted), cachedTokens);
    // Links matched to engine blocks are the events' to forget; the index leaves them out here.
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
      if (!d.residency.live(replica)) return;
      observe?.learned(replica, d.residency.learn(replica, identity.chain, identity.chainTokens, promptTokens, sentAt).reason);
    }, LEARN_DELAY_MS).unref();
  }

  return {
    routed(ctx, dec) {
      const id = ctx.identity;
      const key = id.sessionKey ?? id.conversationKey;
      // A fresh placement counts in its replica's working set at once: sessions starting together
      // must see each other before any of them is served.
      if (key !== null && (dec.reason === 'placed' || dec.reason === 'capacity' || (dec.reason === 'spill' && id.sessionKey === null && ctx.pin === null))) {
        touch(key, dec.ranked[0].name, id, ctx.now, true);
      }
      // Its prefix is believed on its replica from the moment it is sent, not from its answer: the
      // next caller of the same prompt, arriving while this one still prefills, joins it there
      // instead of prefilling it again elsewhere. Measured on the calibrated simulator (npm run
      // bench:calibrate -- versus): 6 shared prompts that fit, 80.2% → 81.1% of prompt tokens from
      // cache over 30 orders (the best placement's); 12 that do not, 47.5% → 48.9%.
      const added: string[] = [];
      d.index.record(id.chain, id.chainTokens, dec.ranked[0].name, ctx.now, added);
      if (added.length > 0) believed.set(id, { replica: dec.ranked[0].name, added });
      const notes = new Map<string, Seen>();
      for (const r of dec.ranked) notes.set(r.name, { matched: ctx.warm.get(r.name) ?? 0, waiting: r.waiting, running: runningOf(r) });
      seen.set(id, notes);
      routedAt.set(id, ctx.now);
    },

    served(identity, outcome) {
      const t = d.now();
      const belief = believed.get(identity);
      if (belief !== undefined) {
        believed.delete(identity);
        if (outcome.result !== 'ok' || outcome.replica !== belief.replica) d.index.forgetLinks(belief.replica, belief.added);
      }
      const key = identity.sessionKey ?? identity.conversationKey;
      if (outcome.result === 'interrupted') {
        d.broken.broke(key, outcome.replica, t);
        return;
      }
      if (outcome.result !== 'ok') return;
      if (d.stateful() && identity.storesResponse && outcome.responseId) {
        d.stored.served(outcome.responseId, outcome.replica, outcome.promptTokens ?? identity.promptTokens, t);
      }
      d.broken.healed(key);
      const s = seen.get(identity)?.get(outcome.replica);
      if (outcome.cachedTokens !== null && s !== undefined) feedback(identity, outcome.replica, s.matched, outcome.cachedTokens, t);
      // A keyless conversation's first turn under its own key: it was counted (and recorded) under
      // its opening's key until now.
      const opening = identity.sessionKey === null ? conversationOf(store, identity, t).opening : null;
      // In the gateway's estimated tokens, like the agent's prompt: placement scales both to the replica's.
      if (key !== null) touch(key, outcome.replica, identity, t, false, opening === null ? undefined : identity.placementKey ?? undefined);
      index.record(identity.chain, identity.chainTokens, outcome.replica, t);
      if (outcome.promptTokens !== null && d.residency.live(outcome.replica)) learnBlocks(identity, outcome.replica, outcome.promptTokens);
      d.traffic.served(outcome.replica, t);
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
  };
}
