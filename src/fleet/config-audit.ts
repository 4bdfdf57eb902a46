import type { ConfigSetting, ReplicaConfig } from './replica-config.js';

/** One setting on which a replica disagrees with the fleet (or, prefix caching, is simply off). */
export interface Mismatch {
  readonly setting: ConfigSetting;
  /** The replica's value, as text (with the served name for per-model settings). */
  readonly value: string;
  /** What the rest of the fleet has, as text. */
  readonly fleet: string;
}

/** KV capacities within this share of the fleet's median are the same (allocators round a little). */
const KV_TOLERANCE = 0.1;

/**
 * The replicas holding a value other than the fleet's: the one most replicas hold, when one value
 * is held by more than any other; with no such majority (two replicas, two values), every replica.
 */
function oddOnes(values: ReadonlyMap<string, string>): { odd: string[]; fleet: string } {
  const counts = new Map<string, number>();
  for (const v of values.values()) counts.set(v, (counts.get(v) ?? 0) + 1);
  if (counts.size <= 1) return { odd: [], fleet: '' };
  const ranked = [...counts].sort((a, b) => b[1] - a[1]);
  const majority = ranked[0][1] > ranked[1][1] ? ranked[0][0] : null;
  const odd = [...values].filter(([, v]) => v !== majority).map(([name]) => name);
  return { odd, fleet: majority ?? ranked.map(([v, n]) => `${v} (${n})`).join(' / ') };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

/**
 * Which replicas are configured unlike the others: prefix caching off (on any replica: an escape
 * hatch that costs every turn its cache), block size or cache dtype not the fleet's, a KV capacity
 * off the fleet's median by more than 10%, and per served model name a different max_model_len or
 * different weights behind it. A setting a replica has not reported is not compared.
 */
export function auditFleet(configs: ReadonlyMap<string, ReplicaConfig>): Map<string, Mismatch[]> {
  const out = new Map<string, Mismatch[]>();
  const flag = (name: string, m: Mismatch) => {
    let list = out.get(name);
    if (list === undefined) out.set(name, (list = []));
    if (!list.some((x) => x.setting === m.setting)) list.push(m);
  };
  for (const [name, c] of configs) if (c.prefixCaching === false) flag(name, { setting: 'prefix_caching', value: 'off', fleet: 'on' });

  const compare = (setting: ConfigSetting, pick: (c: ReplicaConfig) => string | null, label = (v: string) => v) => {
    const values = new Map<string, string>();
    for (const [name, c] of configs) {
      const v = pick(c);
      if (v !== null) values.set(name, v);
    }
    const { odd, fleet } = oddOnes(values);
    for (const name of odd) flag(name, { setting, value: label(values.get(name)!), fleet });
  };
  compare('block_size', (c) => (c.blockSize === null ? null : String(c.blockSize)));
  compare('cache_dtype', (c) => c.cacheDtype);

  const capacities = [...configs].filter(([, c]) => c.kvCapacityTokens !== null) as [string, ReplicaConfig & { kvCapacityTokens: number }][];
  if (capacities.length > 1) {
    const mid = median(capacities.map(([, c]) => c.kvCapacityTokens));
    for (const [name, c] of capacities) {
      if (Math.abs(c.kvCapacityTokens - mid) > KV_TOLERANCE * mid) flag(name, { setting: 'kv_capacity', value: `${c.kvCapacityTokens} tokens`, fleet: `median ${mid} tokens` });
    }
  }

  const served = new Set<string>();
  for (const c of configs.values()) for (const m of Object.keys(c.models)) served.add(m);
  for (const model of served) {
    const serving = new Map([...configs].filter(([, c]) => model in c.models));
    const sub = (setting: ConfigSetting, pick: (c: ReplicaConfig) => string | null) => {
      const values = new Map<string, string>();
      for (const [name, c] of serving) {
        const v = pick(c);
        if (v !== null) values.set(name, v);
      }
      const { odd, fleet } = oddOnes(values);
      for (const name of odd) flag(name, { setting, value: `${model}: ${values.get(name)}`, fleet });
    };
    sub('max_model_len', (c) => (c.models[model].maxModelLen === null ? null : String(c.models[model].maxModelLen)));
    sub('model', (c) => c.models[model].root);
  }
  return out;
}
