// What a replica says of its own configuration, from what the gateway reads anyway: the labels of
// vllm:cache_config_info in /metrics and the entries of /v1/models. Nothing is asked for this alone.

/** The settings the fleet audit compares (a metric label: bounded). */
export const CONFIG_SETTINGS = ['prefix_caching', 'block_size', 'cache_dtype', 'kv_capacity', 'max_model_len', 'model'] as const;
export type ConfigSetting = (typeof CONFIG_SETTINGS)[number];

/** One served model name as a replica lists it. */
export interface ServedModel {
  /** max_model_len (vLLM's --max-model-len, after any shrink to fit the cache). */
  readonly maxModelLen: number | null;
  /** `root`: the weights behind the served name (a path or a hub id). */
  readonly root: string | null;
}

export interface ReplicaConfig {
  /** enable_prefix_caching; null while unread (or not reported). */
  readonly prefixCaching: boolean | null;
  readonly blockSize: number | null;
  readonly cacheDtype: string | null;
  /** num_gpu_blocks × block_size, over its engines. */
  readonly kvCapacityTokens: number | null;
  /** By served model name. */
  readonly models: Readonly<Record<string, ServedModel>>;
}

export const UNREAD_CONFIG: ReplicaConfig = Object.freeze({ prefixCaching: null, blockSize: null, cacheDtype: null, kvCapacityTokens: null, models: Object.freeze({}) });

const LABEL = /([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

/** The label set of one sample, `{a="1",b="x"}`, as an object. */
export function labelsOf(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  LABEL.lastIndex = 0;
  for (let m = LABEL.exec(text); m !== null; m = LABEL.exec(text)) out[m[1]] = m[2];
  return out;
}

const numberOr = (v: string | undefined): number | null => {
  const n = Number(v);
  return v !== undefined && v !== '' && Number.isFinite(n) ? n : null;
};

/** The cache settings in vllm:cache_config_info's labels (the first engine's; engines of one replica share them). */
export function cacheConfigOf(labels: Record<string, string> | null): Pick<ReplicaConfig, 'prefixCaching' | 'blockSize' | 'cacheDtype'> {
  if (labels === null) return { prefixCaching: null, blockSize: null, cacheDtype: null };
  const pc = labels.enable_prefix_caching;
  return {
    prefixCaching: pc === undefined ? null : pc.toLowerCase() === 'true',
    blockSize: numberOr(labels.block_size),
    cacheDtype: labels.cache_dtype ?? null,
  };
}

/** The served names of a /v1/models answer, with their max_model_len and root. */
export function servedModelsOf(entries: readonly unknown[]): Record<string, ServedModel> {
  const out: Record<string, ServedModel> = {};
  for (const e of entries) {
    if (typeof e !== 'object' || e === null) continue;
    const m = e as Record<string, unknown>;
    if (typeof m.id !== 'string') continue;
    out[m.id] = {
      maxModelLen: typeof m.max_model_len === 'number' ? m.max_model_len : null,
      root: typeof m.root === 'string' ? m.root : null,
    };
  }
  return out;
}
