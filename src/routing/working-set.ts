import type { RequestIdentity } from '../identify/identity.js';

/**
 * The agent a request belongs to: the chain link that ends its shared part (system and developer
 * messages, tools: everything before the first user turn), and that part's estimated tokens. Every
 * session of one voice agent starts with the same bytes, so they share this key; null when the
 * request has no shared part to speak of (no user turn, or nothing before it).
 */
export function agentOf(id: RequestIdentity): { key: string; tokens: number } | null {
  if (id.sharedTokens <= 0 || id.firstUser < 0) return null;
  if (id.firstUser === 0) return { key: `seed:${id.seed}`, tokens: id.sharedTokens };
  return { key: id.chain[id.firstUser - 1], tokens: id.sharedTokens };
}

/**
 * Share of a prompt with no shared part of its own (a completion's one string) that a prefix
 * already warm on some replica must cover to stand for its agent at placement (agentOfPlacement).
 * Below it, what is warm is another caller's opening words, not a prompt this one shares.
 */
export const WARM_AGENT_SHARE = 0.3;

/** The key prefix of an agent learnt from a warm prefix (agentOfPlacement). */
export const WARM_AGENT = 'warm:';

/**
 * The agent a new session is placed by: its declared one (agentOf), else, for a prompt with no
 * shared part to speak of (a completion), the longest chain link already warm on a candidate when
 * it covers WARM_AGENT_SHARE of the prompt. A completions agent sends its system prompt inside its
 * one string; the first session of it leaves that prefix in a cache, and later sessions that start
 * with it join that replica, as a chat agent's sessions join their agent's. Placement only: the
 * working set keeps counting such sessions without an agent.
 */
export function agentOfPlacement(id: RequestIdentity, warm: ReadonlyMap<string, number>): { key: string; tokens: number } | null {
  const declared = agentOf(id);
  if (declared !== null || id.sharedTokens > 0) return declared;
  let most = 0;
  for (const w of warm.values()) most = Math.max(most, w);
  if (most <= 0 || most < WARM_AGENT_SHARE * id.promptTokens) return null;
  let link = -1;
  for (let i = 0; i < id.chainTokens.length && id.chainTokens[i] <= most; i++) link = i;
  return link < 0 ? null : { key: WARM_AGENT + id.chain[link], tokens: id.chainTokens[link] };
}

/** One replica's estimated working set: what its recently active sessions need in its KV cache. */
export interface ReplicaWorkingSet {
  /** Distinct shared prefixes (each agent's prompt once) + every active session's own tokens. */
  readonly tokens: number;
  /** Active sessions placed here. */
  readonly sessions: number;
  /** Agent key → its shared prefix tokens, for the agents with an active session here. */
  readonly agents: ReadonlyMap<string, number>;
}

export interface WorkingSet {
  /**
   * A session (session key, or a keyless conversation's conversation key) is on `replica` now, with
   * this prompt: counted in that replica's working set until it has been idle for the window.
   * Moving a session takes it off its previous replica. `replaces`: the key it was counted under
   * until now (a keyless conversation that has just taken its own key), no longer counted.
   */
  touch(key: string, replica: string, agent: { key: string; tokens: number } | null, promptTokens: number, now: number, replaces?: string): void;
  /**
   * Another gateway's turn of a session (through the shared store), made at `at`: a touch, unless
   * this gateway already knows of a later turn of that session.
   */
  heard(key: string, replica: string, agent: { key: string; tokens: number } | null, promptTokens: number, at: number, replaces?: string): void;
  /** Read as it is now: the object (and its agents) may change with the next touch, so copy what is kept. */
  of(replica: string, now: number): ReplicaWorkingSet;
  /** Replicas with an active session of this agent. */
  homesOf(agent: string, now: number): readonly string[];
  /** Agents with an active session anywhere: key → tokens. */
  agents(now: number): ReadonlyMap<string, number>;
  /** Σ of agents(now)'s tokens, without copying them. */
  agentTokens(now: number): number;
  /** Whether agents(now) has this agent. */
  hasAgent(agent: string, now: number): boolean;
  /** Mean own (non-shared) tokens of the active sessions; 0 with none. */
  meanOwnTokens(now: number): number;
  /** Sessions active anywhere. */
  activeSessions(now: number): number;
  /** The replica's cache is gone (restart, left): its sessions no longer count there. */
  forgetReplica(replica: string): void;
  setWindow(ms: number): void;
}

const EMPTY: ReplicaWorkingSet = Object.freeze({ tokens: 0, sessions: 0, agents: new Map<string, number>() });

interface Active {
  replica: string;
  agent: string | null;
  agentTokens: number;
  own: number;
  lastSeen: number;
}

interface Tally {
  own: number;
  sessions: number;
  /** agent → its tokens, for the agents with an active session here (read as is by of()). */
  agents: Map<string, number>;
  /** agent → its active sessions here. */
  counts: Map<string, number>;
  shared: number;
  /** What of() returns, kept so that reading a working set allocates nothing. */
  view: { tokens: number; sessions: number; agents: ReadonlyMap<string, number> };
}

/**
 * Working sets kept incrementally: a touch adds a session to its replica's tally, the sweep takes
 * off the sessions idle past the window (a Map in recency order, oldest first), so reading a
 * replica's working set is O(1) plus the expired. At most `maxSessions` sessions are tracked (the
 * least recently active go first).
 */
export function createWorkingSet(opts: { windowMs: number; maxSessions: number }): WorkingSet {
  let window = opts.windowMs;
  const active = new Map<string, Active>();
  const tallies = new Map<string, Tally>();
  const fleetAgents = new Map<string, [number, number]>();
  // Σ of fleetAgents' tokens, kept with it.
  let fleetAgentTokens = 0;
  let ownTotal = 0;

  const tally = (replica: string): Tally => {
    let t = tallies.get(replica);
    if (t === undefined) {
      const agents = new Map<string, number>();
      t = { own: 0, sessions: 0, agents, counts: new Map(), shared: 0, view: { tokens: 0, sessions: 0, agents } };
      tallies.set(replica, t);
    }
    return t;
  };

  function add(a: Active) {
    const t = tally(a.replica);
    t.own += a.own;
    t.sessions++;
    ownTotal += a.own;
    if (a.agent === null) return;
    const got = t.counts.get(a.agent);
    if (got === undefined) {
      t.agents.set(a.agent, a.agentTokens);
      t.counts.set(a.agent, 1);
      t.shared += a.agentTokens;
    } else t.counts.set(a.agent, got + 1);
    const f = fleetAgents.get(a.agent);
    if (f === undefined) {
      fleetAgents.set(a.agent, [a.agentTokens, 1]);
      fleetAgentTokens += a.agentTokens;
    } else f[1]++;
  }

  function drop(a: Active) {
    const t = tally(a.replica);
    t.own -= a.own;
    t.sessions--;
    ownTotal -= a.own;
    if (a.agent === null) return;
    const got = t.counts.get(a.agent);
    if (got !== undefined) {
      if (got <= 1) {
        t.shared -= t.agents.get(a.agent) ?? 0;
        t.agents.delete(a.agent);
        t.counts.delete(a.agent);
      } else t.counts.set(a.agent, got - 1);
    }
    const f = fleetAgents.get(a.agent);
    if (f !== undefined && --f[1] <= 0) {
      fleetAgents.delete(a.agent);
      fleetAgentTokens -= f[0];
    }
  }

  function sweep(now: number) {
    for (const [key, a] of active) {
      if (now - a.lastSeen <= window) break;
      drop(a);
      active.delete(key);
    }
  }

  function touch(key: string, replica: string, agent: { key: string; tokens: number } | null, promptTokens: number, now: number, replaces?: string) {
    sweep(now);
    const before = replaces === undefined || replaces === key ? undefined : active.get(replaces);
    if (before !== undefined) {
      drop(before);
      active.delete(replaces as string);
    }
    const had = active.get(key);
    if (had !== undefined) {
      drop(had);
      active.delete(key);
    }
    const a: Active = {
      replica, agent: agent?.key ?? null, agentTokens: agent?.tokens ?? 0,
      own: Math.max(0, promptTokens - (agent?.tokens ?? 0)), lastSeen: now,
    };
    add(a);
    active.set(key, a);
    if (active.size > opts.maxSessions) {
      const [oldest, o] = active.entries().next().value as [string, Active];
      drop(o);
      active.delete(oldest);
    }
  }

  return {
    touch,
    heard(key, replica, agent, promptTokens, at, replaces) {
      const had = active.get(key);
      if (had !== undefined && had.lastSeen > at) return;
      touch(key, replica, agent, promptTokens, at, replaces);
    },
    of(replica, now) {
      sweep(now);
      const t = tallies.get(replica);
      if (t === undefined) return EMPTY;
      t.view.tokens = t.shared + t.own;
      t.view.sessions = t.sessions;
      return t.view;
    },
    homesOf(agent, now) {
      sweep(now);
      const out: string[] = [];
      for (const [name, t] of tallies) if (t.agents.has(agent)) out.push(name);
      return out;
    },
    agents(now) {
      sweep(now);
      const out = new Map<string, number>();
      for (const [k, [tokens]] of fleetAgents) out.set(k, tokens);
      return out;
    },
    agentTokens(now) {
      sweep(now);
      return fleetAgentTokens;
    },
    hasAgent(agent, now) {
      sweep(now);
      return fleetAgents.has(agent);
    },
    meanOwnTokens(now) {
      sweep(now);
      return active.size === 0 ? 0 : ownTotal / active.size;
    },
    activeSessions(now) {
      sweep(now);
      return active.size;
    },
    forgetReplica(replica) {
      for (const [key, a] of active) {
        if (a.replica !== replica) continue;
        drop(a);
        active.delete(key);
      }
      tallies.delete(replica);
    },
    setWindow(ms) { window = ms; },
  };
}
