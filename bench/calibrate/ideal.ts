// What hit rate a recorded trace allows, on its fleet's capacities. Three figures, from loosest to
// the one a router can reach:
//
// - unbounded: every block an earlier request computed is warm (the voice bench's ideal: caches of
//   unbounded size, any placement);
// - pooled bound: one cache of the whole fleet's usable blocks, evicting the block used furthest
//   in the future (Belady), a block never cached when it is not needed before everything the
//   cache holds. No placement and no eviction policy beats it on these capacities: a replica's
//   cache can only hold a subset of the pool, and vLLM's LRU free queue can only do worse than
//   the furthest-next-use choice;
// - best placement: the highest hit rate of any placement that keeps each group of the workload
//   (a shared prompt, a session) on one replica, replayed through the simulator's vLLM block pool
//   and scheduler (engine-replay.ts) with the trace's arrival times: vLLM's own eviction, the
//   blocks running requests hold, and the order requests arrive in. Searched exhaustively when
//   there are few placements (replicas are alike, so the first group is fixed), else from the
//   best of those that keep each shared prompt's groups together, one group moved at a time.
//
// The last is the ideal the goals are measured against ("% of ideal"): it is what a router that
// knew the whole trace in advance, and placed by groups as warmroute does, would get from vLLM.
// When the search is exhaustive it also gives the best shape's median placement: what a router
// that knows how many groups each replica should keep, but not which ones the future favours,
// gets in expectation.

import { blockHash } from '../sim/hash.js';
import { replayEngine, type ReplayOptions } from './engine-replay.js';
import { hitRate, type Trace } from './trace.js';

const ROOT = 0x5eed;

function chain(tokens: readonly number[], blocks: number, bs: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < blocks; i++) out.push(blockHash(i === 0 ? ROOT : out[i - 1], tokens, i * bs, (i + 1) * bs));
  return out;
}

interface BlockedRequest {
  /** Hashes of the blocks a lookup may hit: ⌊(prompt − 1) / block⌋ of them. */
  lookup: number[];
  /** Hashes of the full blocks the request leaves cached: prompt and output, but the last token. */
  stored: number[];
  prompt: number;
}

function blocked(trace: Trace): BlockedRequest[] {
  const bs = trace.engine.blockSize;
  return trace.requests.filter((r) => r.cachedTokens !== null).map((r) => {
    const all = [...r.promptIds, ...r.outputIds.slice(0, -1)];
    const stored = chain(all, Math.floor(all.length / bs), bs);
    return { lookup: stored.slice(0, Math.floor((r.promptIds.length - 1) / bs)), stored, prompt: r.promptIds.length };
  });
}

/** Σ hits / Σ prompt tokens with every earlier block warm. */
export function unboundedHitRate(trace: Trace): number {
  const seen = new Set<number>();
  let q = 0;
  let h = 0;
  for (const r of blocked(trace)) {
    let n = 0;
    while (n < r.lookup.length && seen.has(r.lookup[n])) n++;
    q += r.prompt;
    h += n * trace.engine.blockSize;
    for (const x of r.stored) seen.add(x);
  }
  return q === 0 ? 0 : h / q;
}

/** The pooled Belady bound (see the file's head). */
export function pooledBoundHitRate(trace: Trace): number {
  const reqs = blocked(trace);
  const capacity = trace.replicas.length * Math.max(0, trace.engine.kvBlocks - 1);
  // For each request and each of its stored blocks, the next request index that looks it up.
  const nextUse = new Map<number, number[]>();
  reqs.forEach((r, i) => { for (const x of r.lookup) { const l = nextUse.get(x) ?? []; l.push(i); nextUse.set(x, l); } });
  const cursor = new Map<number, number>();
  const next = (x: number, after: number): number => {
    const l = nextUse.get(x);
    if (!l) return Infinity;
    let k = cursor.get(x) ?? 0;
    while (k < l.length && l[k] <= after) k++;
    cursor.set(x, k);
    return k < l.length ? l[k] : Infinity;
  };
  const cache = new Set<number>();
  let q = 0;
  let h = 0;
  reqs.forEach((r, i) => {
    let n = 0;
    while (n < r.lookup.length && cache.has(r.lookup[n])) n++;
    q += r.prompt;
    h += n * trace.engine.blockSize;
    for (const x of r.stored) {
      if (cache.has(x)) continue;
      const mine = next(x, i);
      if (mine === Infinity) continue;
      if (cache.size < capacity) {
        cache.add(x);
        continue;
      }
      let victim = -1;
      let far = mine;
      for (const y of cache) {
        const u = next(y, i);
        if (u > far) {
          far = u;
          victim = y;
        }
      }
      if (victim >= 0) {
        cache.delete(victim);
        cache.add(x);
      }
    }
  });
  return q === 0 ? 0 : h / q;
}

export interface PlacementIdeal {
  hitRate: number;
  /**
   * When searched exhaustively: the shape (groups per replica) whose median placement is best,
   * and that median. A router that does not know the order requests will come in can pick the
   * shape but not which groups fill it: this is what it gets in expectation, where `hitRate` is
   * the luckiest placement with hindsight.
   */
  bestShape: { shape: string; median: number } | null;
  /** group → replica index of the best placement found. */
  placement: Record<string, number>;
  /** Placements replayed. */
  tried: number;
  exhaustive: boolean;
}

/** The group's shared prompt: the first block of its first request (the salt and system prompt start there). */
function familyOf(trace: Trace): Map<string, string> {
  const bs = trace.engine.blockSize;
  const out = new Map<string, string>();
  for (const r of trace.requests) if (!out.has(r.group)) out.set(r.group, r.promptIds.slice(0, bs).join(','));
  return out;
}

export function bestPlacement(trace: Trace, o: ReplayOptions, budget = 3000): PlacementIdeal {
  const served = { ...trace, requests: trace.requests.filter((r) => r.cachedTokens !== null && r.replica >= 0) };
  const groups = [...new Set(served.requests.map((r) => r.group))];
  const R = trace.replicas.length;
  let tried = 0;
  const score = (assign: ReadonlyMap<string, number>): number => {
    tried++;
    const t = { ...served, requests: served.requests.map((r) => ({ ...r, replica: assign.get(r.group) as number })) };
    const p = replayEngine(t, o);
    return hitRate(t.requests.map((r, i) => ({ promptIds: r.promptIds, cachedTokens: p[i].cachedTokens })));
  };
  let best = new Map<string, number>(groups.map((g) => [g, 0]));
  let bestRate = -1;
  const byShape = new Map<string, number[]>();
  const consider = (assign: Map<string, number>) => {
    const s = score(assign);
    if (s > bestRate) {
      bestRate = s;
      best = new Map(assign);
    }
    const counts = new Array<number>(R).fill(0);
    for (const rep of assign.values()) counts[rep]++;
    const shape = counts.sort((a, b) => b - a).join('/');
    byShape.set(shape, [...(byShape.get(shape) ?? []), s]);
  };
  // Enumerate assignments of `units` (groups, or shared prompts) with the first fixed on replica 0.
  const enumerate = (units: readonly string[][]) => {
    const count = R ** Math.max(0, units.length - 1);
    for (let code = 0; code < count; code++) {
      const assign = new Map<string, number>();
      let c = code;
      units.forEach((u, k) => {
        const rep = k === 0 ? 0 : c % R;
        if (k > 0) c = Math.floor(c / R);
        for (const g of u) assign.set(g, rep);
      });
      consider(assign);
    }
    return count;
  };
  const exhaustive = R ** Math.max(0, groups.length - 1) <= budget;
  if (exhaustive) enumerate(groups.map((g) => [g]));
  else {
    const fam = familyOf(served);
    const byFamily = new Map<string, string[]>();
    for (const g of groups) { const f = fam.get(g) as string; byFamily.set(f, [...(byFamily.get(f) ?? []), g]); }
    const families = [...byFamily.values()];
    if (R ** Math.max(0, families.length - 1) <= budget) enumerate(families);
    else consider(new Map(groups.map((g, k) => [g, k % R])));
    consider(new Map(served.requests.map((r) => [r.group, r.replica])));
    // One group moved at a time, while that improves and the budget lasts.
    let improved = true;
    while (improved && tried < 2 * budget) {
      improved = false;
      for (const g of groups) {
        for (let rep = 0; rep < R; rep++) {
          if (best.get(g) === rep) continue;
          const before = bestRate;
          const assign = new Map(best);
          assign.set(g, rep);
          consider(assign);
          if (bestRate > before) improved = true;
        }
      }
    }
  }
  let bestShape: PlacementIdeal['bestShape'] = null;
  if (exhaustive) {
    for (const [shape, rates] of byShape) {
      const sorted = [...rates].sort((a, b) => a - b);
      const median = sorted[sorted.length >> 1];
      if (bestShape === null || median > bestShape.median) bestShape = { shape, median };
    }
  }
  return { hitRate: bestRate, bestShape, placement: Object.fromEntries(best), tried, exhaustive };
}
