// A model of SGLang's router `cache_aware` policy (sglang-router 0.3.2, its documented defaults), so
// that the router the real witness runs beside warmroute can be run on the calibrated simulator
// over many seeds, where the real fleet gives three noisy runs. What the policy does, per its
// arguments' documentation:
// - each worker has an approximate radix tree of the texts sent to it (never the replica's real
//   cache: no KV events), evicted only once it passes max_tree_size (2^26 characters, never within
//   a benchmark's minutes);
// - when the load is imbalanced (max − min in-flight > balance_abs_threshold 64 and max >
//   balance_rel_threshold 1.5 × min) the least loaded worker takes the request;
// - else the worker whose tree matches the longest prefix takes it when that match is more than
//   cache_threshold (0.3) of the request; below that the worker with the smallest tree does.
// The model matches on token ids where SGLang matches on characters: the same prefixes, measured in
// another unit (the threshold is a ratio, the tree sizes only ever compared with each other).

export interface SglangModelOptions {
  cacheThreshold: number;
  balanceAbsThreshold: number;
  balanceRelThreshold: number;
}

export const SGLANG_DEFAULTS: SglangModelOptions = { cacheThreshold: 0.3, balanceAbsThreshold: 64, balanceRelThreshold: 1.5 };

type Node = Map<number, Node>;

class PrefixTree {
  private readonly root: Node = new Map();
  size = 0;

  /** Tokens of `ids` from the start that an earlier insert shares. */
  match(ids: readonly number[]): number {
    let node = this.root;
    let n = 0;
    for (const id of ids) {
      const next = node.get(id);
      if (!next) break;
      node = next;
      n++;
    }
    return n;
  }

  insert(ids: readonly number[]): void {
    let node = this.root;
    for (const id of ids) {
      let next = node.get(id);
      if (!next) {
        next = new Map();
        node.set(id, next);
        this.size++;
      }
      node = next;
    }
  }
}

export interface SglangModel {
  /** The worker index for a prompt; the caller reports its end with done(). */
  route(ids: readonly number[]): number;
  done(worker: number): void;
}

export function createSglangModel(workers: number, o: SglangModelOptions = SGLANG_DEFAULTS): SglangModel {
  const trees = Array.from({ length: workers }, () => new PrefixTree());
  const load = new Array<number>(workers).fill(0);
  const argmin = (f: (i: number) => number) => {
    let b = 0;
    for (let i = 1; i < workers; i++) if (f(i) < f(b)) b = i;
    return b;
  };
  return {
    route(ids) {
      const max = Math.max(...load);
      const min = Math.min(...load);
      let w: number;
      if (max - min > o.balanceAbsThreshold && max > o.balanceRelThreshold * min) w = argmin((i) => load[i]);
      else {
        let best = 0;
        let bestMatch = -1;
        for (let i = 0; i < workers; i++) {
          const m = trees[i].match(ids);
          if (m > bestMatch) {
            best = i;
            bestMatch = m;
          }
        }
        w = bestMatch / Math.max(1, ids.length) > o.cacheThreshold ? best : argmin((i) => trees[i].size);
      }
      trees[w].insert(ids);
      load[w]++;
      return w;
    },
    done(worker) {
      load[worker]--;
    },
  };
}
