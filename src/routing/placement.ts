import { weightOf } from './load.js';
import type { ReplicaView } from './types.js';
import type { ReplicaWorkingSet } from './working-set.js';

/**
 * Capacity-aware placement of a new session, once the fleet's KV caches cannot hold every agent
 * on every replica. What decides is each replica's estimated working set (working-set.ts) against
 * its KV capacity (vllm:cache_config_info), in the replica's tokens:
 *   1. the agent's own replicas — its prompt is resident there (sessions of it active, or the
 *      prefix index holds it) — that have room for the session, under the load bounds: the agent
 *      stays together;
 *   2. else another replica where it fits: the most free cache, then the fewest active sessions
 *      (an agent's first placement, or a spread because its replicas are full — `capacity` — or
 *      over the load bound — `spill`);
 *   3. nothing fits: the agent's own replica where it adds least (its prompt needs no room
 *      there); a new agent is contained on a replica whose cache overflows already (while none
 *      does, the fullest), so that the replicas whose working sets fit keep them — `capacity`.
 * Under the load bounds means: under the in-flight bound the caller passes, and no replica taking
 * more than loadFactor × the weighted average of active sessions (think time leaves most voice
 * sessions with nothing in flight, so their count is the load that placement balances) — for the
 * agent's own replicas, its hard-cap factor × that average instead.
 */
export interface PlacementInput {
  readonly candidates: readonly ReplicaView[];
  /** Per candidate: its working set (tokens already in the replica's units). */
  readonly sets: readonly ReplicaWorkingSet[];
  /** Per candidate: KV capacity in tokens, Infinity when unknown. */
  readonly capacity: readonly number[];
  readonly agent: { readonly key: string; readonly tokens: number } | null;
  /** Tokens the session itself will need beyond its agent's prompt. */
  readonly ownTokens: number;
  /** Per candidate: the agent's prompt is believed resident (prefix index). */
  readonly indexed: readonly boolean[];
  /** Per candidate: under the in-flight bound for new placements (soft cap). */
  readonly loadOk: readonly boolean[];
  /**
   * Per candidate: under the bound a session's own replica may reach (hard cap). An agent's
   * replicas are its sessions' home: a burst in flight does not split it for good.
   */
  readonly homeLoadOk: readonly boolean[];
  /** Share of the capacity a working set may plan to fill. */
  readonly fill: number;
  readonly loadFactor: number;
  /**
   * The bound on active sessions for an agent's own replicas (hardCapFactor × the average, as a
   * pinned session's replica may go to the hard cap): sessions arrive in bursts, and an agent
   * split for a moment's count stays split (its prompt cached twice) for as long as its calls last.
   */
  readonly homeLoadFactor: number;
}

export type PlacementReason = 'placed' | 'capacity' | 'spill';

export interface Placement {
  readonly index: number;
  readonly reason: PlacementReason;
}

/** −1 when no candidate is under the load bounds: the caller falls back to its own rule. */
export function placeByCapacity(p: PlacementInput): Placement {
  const n = p.candidates.length;
  const agent = p.agent;
  let sessions = 0;
  let weight = 0;
  for (let i = 0; i < n; i++) {
    sessions += p.sets[i].sessions;
    weight += weightOf(p.candidates[i]);
  }
  const hasAgent = (i: number) => agent !== null && p.sets[i].agents.has(agent.key);
  const resident = (i: number) => hasAgent(i) || p.indexed[i];
  const need = (i: number) => p.ownTokens + (agent === null || hasAgent(i) ? 0 : agent.tokens);
  const over = (i: number) => p.sets[i].tokens + need(i) - p.fill * p.capacity[i];
  const room = (i: number) => (resident(i) ? p.homeLoadOk[i] : p.loadOk[i])
    && p.sets[i].sessions + 1 <= Math.ceil(((resident(i) ? p.homeLoadFactor : p.loadFactor) * (sessions + 1) * weightOf(p.candidates[i])) / weight);

  const best = (ok: (i: number) => boolean, better: (a: number, b: number) => boolean): number => {
    let b = -1;
    for (let i = 0; i < n; i++) if (ok(i) && (b < 0 || better(i, b))) b = i;
    return b;
  };
  const fewerSessions = (a: number, b: number) => p.sets[a].sessions < p.sets[b].sessions
    || (p.sets[a].sessions === p.sets[b].sessions && over(a) < over(b));

  const home = best((i) => resident(i) && room(i) && over(i) <= 0, fewerSessions);
  if (home >= 0) return { index: home, reason: 'placed' };
  // An agent new to a replica takes its prompt there: where the most cache is free, so replicas
  // fill by tokens, not by session count (two small agents and one large are not three alike).
  const moreRoom = (a: number, b: number) => over(a) < over(b) || (over(a) === over(b) && p.sets[a].sessions < p.sets[b].sessions);
  const elsewhere = best((i) => !resident(i) && room(i) && over(i) <= 0, moreRoom);
  if (elsewhere >= 0) {
    let full = false;
    let busy = false;
    for (let i = 0; i < n; i++) {
      if (!resident(i)) continue;
      if (over(i) > 0) full = true;
      else busy = true;
    }
    return { index: elsewhere, reason: full ? 'capacity' : busy ? 'spill' : 'placed' };
  }
  // Nothing fits anywhere: the fleet cannot hold every active agent. With its agent resident
  // somewhere, the session goes where that adds least (no room for the prompt needed). A new
  // agent is contained: it goes to a replica whose cache overflows already (the one with the most
  // room among those), since that one evicts anyway, and the replicas whose working sets still fit
  // keep them warm; while none overflows, the fullest becomes the one that does. Spreading the
  // overflow over every replica makes every cache thrash: on the real fleet's recorded run (2
  // replicas, 12 shared prompts where 8 fit) 45.4% of prompt tokens came from cache against 54.6%
  // contained (docs/benchmarks/calibration.md). Once every replica overflows there is nothing
  // left to protect, and the most room wins, which keeps the load even.
  const homeLeast = best((i) => resident(i) && room(i), moreRoom);
  if (homeLeast >= 0) return { index: homeLeast, reason: 'capacity' };
  // Overflowing is past the cache itself, not the share placement plans to fill: a replica a
  // little past `fill` still holds its working set.
  const overflowing = best((i) => room(i) && p.sets[i].tokens > p.capacity[i], moreRoom);
  if (overflowing >= 0) return { index: overflowing, reason: 'capacity' };
  const fullest = (a: number, b: number) => over(a) > over(b) || (over(a) === over(b) && p.sets[a].sessions < p.sets[b].sessions);
  return { index: best(room, fullest), reason: 'capacity' };
}

/**
 * Whether the fleet's caches cannot hold every active agent on every replica: the agents'
 * prompts together, plus a replica's share of the sessions' own tokens, pass `fill` × the
 * smallest capacity. Below that every replica can keep every agent and placement need not care.
 */
export function underPressure(agentTokens: number, ownTokens: number, capacities: readonly number[], fill: number): boolean {
  let min = Infinity;
  for (const c of capacities) min = Math.min(min, c);
  return underPressureOf(agentTokens, ownTokens, min, capacities.length, fill);
}

/** underPressure() from the smallest of `count` capacities (Infinity: none known). */
export function underPressureOf(agentTokens: number, ownTokens: number, smallest: number, count: number, fill: number): boolean {
  if (count === 0 || !Number.isFinite(smallest)) return false;
  return agentTokens + ownTokens / count > fill * smallest;
}

/**
 * How many sessions an agent's replica may hold beyond the emptiest candidate's and still take
 * the agent's next session (placeForGrowth). One is the prompt the agent saves there (a voice
 * agent's prompt is about one session's history); the second absorbs the order in which sessions
 * arrive, so that one agent's sessions starting close together do not split it. Measured on the
 * simulator (docs/design-notes.md, "Few agents, long sessions"): 1 split agents early, 3 let one
 * replica run 2–3 sessions ahead of the others.
 */
export const HOME_SLACK_SESSIONS = 2;

export interface GrowthInput {
  readonly candidates: readonly ReplicaView[];
  /** Per candidate: its working set (its active sessions and their agents). */
  readonly sets: readonly ReplicaWorkingSet[];
  readonly agent: string | null;
  /**
   * Per candidate: the agent's prompt is warm there although no session of it is counted (an
   * agent learnt from a warm prefix, agentOfPlacement): its replica as much as one with sessions.
   */
  readonly warm?: readonly boolean[];
  /** Per candidate: under the in-flight bound for new placements (soft cap). */
  readonly loadOk: readonly boolean[];
  /** Per candidate: under the bound a session's own replica may reach (hard cap). */
  readonly homeLoadOk: readonly boolean[];
}

/**
 * Placement of a new session while every agent still fits every cache, on replicas whose KV
 * capacity is known. The sessions' histories are what will fill the caches, and a session's
 * first turn does not say how long it will grow: so they are spread evenly from the start, in
 * sessions per unit of weight, and an agent's sessions are kept together within that (its prompt
 * cached once, not on every replica, leaves its replica room for the histories):
 *   1. the agent's replica with the fewest sessions (one with an active session of it), if it holds
 *      no more than HOME_SLACK_SESSIONS beyond the emptiest candidate and is under the hard cap;
 *   2. else the candidate under the soft cap with the fewest sessions, the fewest agents on a tie
 *      (the least cache taken by prompts), the first in order after that.
 * Where an agent's prompt is cached matters less here than where its sessions are: only the
 * working set (shared by every pod) decides, not this pod's prefix index, so that pods agree.
 * The reason is `placed`: nothing is evicted yet. −1 when no candidate is under the soft cap.
 */
export function placeForGrowth(p: GrowthInput): Placement {
  const n = p.candidates.length;
  let weight = 0;
  for (const r of p.candidates) weight += weightOf(r);
  const mean = n === 0 ? 1 : weight / n;
  // Sessions in units of a mean-weight replica: a replica of twice the weight takes twice as many.
  const load = (i: number) => (p.sets[i].sessions * mean) / weightOf(p.candidates[i]);
  let emptiest = Infinity;
  for (let i = 0; i < n; i++) if (p.loadOk[i]) emptiest = Math.min(emptiest, load(i));
  if (p.agent !== null) {
    let home = -1;
    for (let i = 0; i < n; i++) {
      if (!p.homeLoadOk[i] || !(p.sets[i].agents.has(p.agent) || p.warm?.[i] === true)) continue;
      if (home < 0 || load(i) < load(home)) home = i;
    }
    if (home >= 0 && load(home) <= emptiest + HOME_SLACK_SESSIONS) return { index: home, reason: 'placed' };
  }
  let best = -1;
  for (let i = 0; i < n; i++) {
    if (!p.loadOk[i]) continue;
    if (best < 0 || load(i) < load(best) || (load(i) === load(best) && p.sets[i].agents.size < p.sets[best].agents.size)) best = i;
  }
  return { index: best, reason: 'placed' };
}
