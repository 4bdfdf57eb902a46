/**
 * Every routing knob, with its default and why. The gateway maps its YAML `routing:` section onto
 * `Partial<RoutingOptions>` (nested objects may be partial too) and passes it as
 * `createRouter(strategy, { options })`; anything left out takes the default below.
 */

export interface ScorerWeights {
  /** Session pin scorer: 1 for the replica a keyed session is pinned to. */
  readonly sessionPin: number;
  /** Prefix match scorer: matched prefix tokens / prompt tokens, per replica. */
  readonly prefixMatch: number;
  /** Load scorer: 1 for an idle replica with an empty KV cache, towards 0 as either fills. */
  readonly load: number;
}

/** The cost model's starting point for a replica it has not observed yet (and the pull-back target). */
export interface CostPrior {
  /** TTFT of a fully cached prompt on an idle replica (seed figure: 28 ms warm floor). */
  readonly fixedMs: number;
  /** Prefill per uncached token (seed figures: 130 ms fresh 1K, 864 ms cold 5.5K → ~0.13). */
  readonly prefillMsPerToken: number;
  /** Added TTFT per request waiting in the replica's queue (vllm:num_requests_waiting). */
  readonly queueMsPerWaiting: number;
  /** Added TTFT per request already running (decode batches slow each step a little). */
  readonly msPerRunning: number;
}

export interface RoutingOptions {
  /**
   * c of consistent hashing with bounded loads (Mirrokni–Thorup–Zadimoghaddam): a NEW placement
   * (or a spill target) may not take a replica past c × the average in-flight load, weighted.
   */
  readonly loadFactor: number;
  /**
   * A pinned session (or a keyless one following its prefix) stays on its replica until that
   * replica's load passes max(hardCapFactor × average, hardCapMin); then it spills and re-pins.
   */
  readonly hardCapFactor: number;
  /**
   * Floor of the hard cap, in requests in flight per unit of weight: at low traffic balance never
   * beats a warm cache (one vLLM replica decodes dozens of voice sessions at once without queueing).
   */
  readonly hardCapMin: number;
  /**
   * Half-life of each replica's recent request count, the load that new placements and spill
   * targets are also bounded on (c × average): sessions in think time have nothing in flight.
   */
  readonly trafficHalfLifeMs: number;
  /** A session that moved less than this long ago only moves again for the hard cap or a failure (anti-flap). */
  readonly spillCooldownMs: number;
  /** Worth of one unit of weighted score, in ms of estimated TTFT (score bonuses are subtracted from it). */
  readonly scoreMs: number;
  /** Estimated costs within this many ms are a tie, broken at random. */
  readonly tieMs: number;
  readonly weights: ScorerWeights;
  readonly prior: CostPrior;
  /** RLS forgetting factor per observation: 0.98 ≈ the last 50 requests to each replica weigh most. */
  readonly costForgetting: number;
  /** Prefix index bound in (chain link × replica) entries; 0 disables prefix matching. */
  readonly prefixMaxEntries: number;
  /** A link not served again for this long is assumed evicted (≈ vLLM's prefix lifetime under steady load). */
  readonly prefixTtlMs: number;
  /** session-hash strategy: ring points per unit of replica weight. */
  readonly ringVnodes: number;
  /** session-hash strategy, requests without a key: rotate (`round-robin`) or hash the first user turn (`first-turn`). */
  readonly sessionHashKeyless: 'round-robin' | 'first-turn';
}

export const DEFAULT_ROUTING_OPTIONS: RoutingOptions = {
  loadFactor: 1.25,
  hardCapFactor: 2,
  hardCapMin: 16,
  trafficHalfLifeMs: 30_000,
  spillCooldownMs: 10_000,
  scoreMs: 100,
  tieMs: 1,
  weights: { sessionPin: 1, prefixMatch: 1, load: 0.2 },
  prior: { fixedMs: 30, prefillMsPerToken: 0.13, queueMsPerWaiting: 50, msPerRunning: 1 },
  costForgetting: 0.98,
  // 10,000 sessions × 30 turns × ~2 new links per turn, rounded up: < 100 MB (see prefix-index.ts).
  prefixMaxEntries: 640_000,
  prefixTtlMs: 10 * 60_000,
  ringVnodes: 160,
  sessionHashKeyless: 'round-robin',
};

export type RoutingOptionsInput = Partial<Omit<RoutingOptions, 'weights' | 'prior'>> & {
  readonly weights?: Partial<ScorerWeights>;
  readonly prior?: Partial<CostPrior>;
};

/** Defaults filled in and values checked once, at router creation. */
export function resolveRoutingOptions(input: RoutingOptionsInput = {}): RoutingOptions {
  const d = DEFAULT_ROUTING_OPTIONS;
  const o: RoutingOptions = {
    ...d,
    ...stripUndefined(input),
    weights: { ...d.weights, ...stripUndefined(input.weights ?? {}) },
    prior: { ...d.prior, ...stripUndefined(input.prior ?? {}) },
  };
  const bad = (what: string): never => {
    throw new Error(`routing option ${what}`);
  };
  if (!(o.loadFactor > 1)) bad(`loadFactor must be > 1 (got ${o.loadFactor})`);
  if (!(o.hardCapFactor >= o.loadFactor)) bad(`hardCapFactor must be ≥ loadFactor (got ${o.hardCapFactor})`);
  if (!(o.costForgetting > 0 && o.costForgetting <= 1)) bad(`costForgetting must be in (0, 1] (got ${o.costForgetting})`);
  if (!(o.prior.prefillMsPerToken > 0)) bad('prior.prefillMsPerToken must be > 0');
  for (const [k, v] of Object.entries({ ...o.weights, hardCapMin: o.hardCapMin, trafficHalfLifeMs: o.trafficHalfLifeMs, spillCooldownMs: o.spillCooldownMs, scoreMs: o.scoreMs, tieMs: o.tieMs, prefixMaxEntries: o.prefixMaxEntries, prefixTtlMs: o.prefixTtlMs })) {
    if (!(v >= 0)) bad(`${k} must be ≥ 0 (got ${v})`);
  }
  if (!(o.ringVnodes >= 1)) bad(`ringVnodes must be ≥ 1 (got ${o.ringVnodes})`);
  return o;
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  const out: Partial<T> = {};
  for (const k of Object.keys(o) as (keyof T)[]) if (o[k] !== undefined) out[k] = o[k];
  return out;
}
