import type { RoutingOptions } from '../config/schema.js';
import type { RequestIdentity } from '../identify/identity.js';
import { underPressureOf } from './placement.js';
import type { ReplicaView } from './types.js';
import { agentOf, type WorkingSet } from './working-set.js';

export interface PressureWatch {
  /**
   * Whether placement is capacity-aware now: the candidates' caches cannot hold every active
   * agent (this request's included) on each of them, now or within the last working-set window
   * (sessions ending for a moment do not flip it back and forth). Asked at most once per decision
   * (`forDecision`), and only by a fresh placement.
   */
  decide(identity: RequestIdentity, candidates: readonly ReplicaView[], t: number): boolean;
  /** The question for one decision, answered once however often it is asked. */
  forDecision(identity: RequestIdentity, t: number): (candidates: readonly ReplicaView[]) => boolean;
  /** Whether the fleet was found under pressure within the window before `t` (the warmup asks). */
  recent(t: number): boolean;
}

/**
 * The one place the fleet's KV pressure is judged and remembered (the picker reads it, never
 * writes it). The demand is the working set's, scaled to the replicas' tokens by the cost model's
 * token scale; a candidate of unknown capacity holds anything.
 */
export function createPressureWatch(d: { workingSet: WorkingSet; tokenScale: () => number; options: () => RoutingOptions }): PressureWatch {
  let at = -Infinity;
  const watch: PressureWatch = {
    forDecision(identity, t) {
      let answer: boolean | null = null;
      return (candidates) => (answer ??= watch.decide(identity, candidates, t));
    },
    decide(identity, candidates, t) {
      const o = d.options();
      const ws = d.workingSet;
      const scale = d.tokenScale();
      let smallest = Infinity;
      for (const r of candidates) if (r.kvCapacityTokens !== null && r.kvCapacityTokens > 0 && r.kvCapacityTokens < smallest) smallest = r.kvCapacityTokens;
      const agent = agentOf(identity);
      const demand = (ws.agentTokens(t) + (agent !== null && !ws.hasAgent(agent.key, t) ? agent.tokens : 0)) * scale;
      if (underPressureOf(demand, ws.meanOwnTokens(t) * ws.activeSessions(t) * scale, smallest, candidates.length, o.capacityFill)) at = t;
      return t - at <= o.workingSetWindowMs;
    },
    recent: (t) => t - at <= d.options().workingSetWindowMs,
  };
  return watch;
}
