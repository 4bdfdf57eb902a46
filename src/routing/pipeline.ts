import { errors } from '../errors.js';
import type { Filter, ReplicaView, RouteRequest, ScoredReplica, Scorer } from './types.js';

export interface WeightedScorer {
  readonly scorer: Scorer;
  readonly weight: number;
}

/**
 * Runs the filters in order. An empty result is an error that says which filter emptied it:
 * no healthy replica (503) or no replica serving the model (404 model_not_found).
 */
export function filterCandidates(req: RouteRequest, filters: readonly Filter[]): readonly ReplicaView[] {
  let candidates = req.replicas;
  for (const f of filters) {
    candidates = f.apply(req, candidates);
    if (candidates.length === 0) {
      if (f.name === 'model') throw errors.modelNotFound([req.identity.model ?? ''], 'model');
      throw errors.noReplica();
    }
  }
  return candidates;
}

/** Weighted sum of the scorers' [0,1] scores per candidate. */
export function scoreCandidates(
  req: RouteRequest,
  candidates: readonly ReplicaView[],
  scorers: readonly WeightedScorer[],
): ScoredReplica[] {
  const totals = new Array<number>(candidates.length).fill(0);
  for (const { scorer, weight } of scorers) {
    if (weight === 0) continue;
    const scores = scorer.score(req, candidates);
    for (let i = 0; i < candidates.length; i++) totals[i] += weight * (scores.get(candidates[i].name) ?? 0);
  }
  return candidates.map((replica, i) => ({ replica, score: totals[i] }));
}
