import { errors } from '../errors.js';
import type { Composition, Decision, Filter, ReplicaView, RouteContext, WeightedScorer } from './types.js';

/**
 * Runs the filters in order. An empty result is an error that says which filter emptied it:
 * no healthy replica (503) or no replica serving the model (404 model_not_found).
 */
export function filterCandidates(ctx: RouteContext, filters: readonly Filter[]): readonly ReplicaView[] {
  let candidates = ctx.replicas;
  for (const f of filters) {
    candidates = f.apply(ctx, candidates);
    if (candidates.length === 0) {
      if (f.name === 'model') throw errors.modelNotFound([ctx.identity.model ?? ''], 'model');
      throw errors.noReplica();
    }
  }
  return candidates;
}

/** Weighted sum of the scorers' [0,1] scores, in candidate order. */
export function scoreCandidates(ctx: RouteContext, candidates: readonly ReplicaView[], scorers: readonly WeightedScorer[]): number[] {
  const totals = new Array<number>(candidates.length).fill(0);
  for (const { scorer, weight } of scorers) {
    if (weight === 0) continue;
    const scores = scorer.score(ctx, candidates);
    for (let i = 0; i < candidates.length; i++) totals[i] += weight * scores[i];
  }
  return totals;
}

/** One routing decision: filters → shortlist (when the strategy has one) → scorers → picker. */
export function decide(ctx: RouteContext, c: Composition): Decision {
  const filtered = filterCandidates(ctx, c.filters);
  if (c.shortlist === undefined) return c.picker.pick(ctx, filtered, scoreCandidates(ctx, filtered, c.scorers));
  const s = c.shortlist(ctx, filtered);
  const narrowed: RouteContext = { ...ctx, fleet: s.fleet };
  return c.picker.pick(narrowed, s.candidates, scoreCandidates(narrowed, s.candidates, c.scorers));
}
