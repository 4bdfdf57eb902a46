// Command-line flags for every replica knob, shared by cli.ts and calibrate.ts.

import type { ParseArgsConfig } from 'node:util';
import type { SimReplicaOptions } from './config.js';
import { parseFaultArg, type Fault } from './faults.js';

type NumericKnob = Exclude<
  {
    [K in keyof SimReplicaOptions]-?: NonNullable<SimReplicaOptions[K]> extends number ? K : never;
  }[keyof SimReplicaOptions],
  'port'
>;

/** flag → option, with the meaning shown by --help. */
export const NUMERIC_FLAGS: Record<string, [NumericKnob, string]> = {
  'seed': ['seed', 'seed for output lengths and texts'],
  'frontend-ms': ['frontendMs', 'fixed API-server latency per request'],
  'tokenize-ms-per-token': ['tokenizeMsPerToken', 'API-server latency per prompt token'],
  'step-base-ms': ['stepBaseMs', 'fixed cost of one engine step'],
  'prefill-ms-per-token': ['prefillMsPerToken', 'prefill cost per uncached token'],
  'attn-ms-per-token-pair': ['attnMsPerTokenPair', 'prefill attention cost per (new token × context token)'],
  'decode-ms-per-seq': ['decodeMsPerSeq', 'step cost per decoding sequence'],
  'decode-ms-per-ctx-token': ['decodeMsPerCtxToken', 'step cost per context token of a decoding sequence'],
  'max-model-len': ['maxModelLen', 'vLLM --max-model-len'],
  'block-size': ['blockSize', 'KV block size in tokens'],
  'kv-blocks': ['kvBlocks', 'KV cache capacity in blocks (num_gpu_blocks)'],
  'max-num-seqs': ['maxNumSeqs', 'vLLM --max-num-seqs'],
  'max-num-batched-tokens': ['maxNumBatchedTokens', 'vLLM --max-num-batched-tokens'],
  'long-prefill-token-threshold': ['longPrefillTokenThreshold', 'vLLM --long-prefill-token-threshold (0: none)'],
  'max-waiting': ['maxWaiting', 'waiting-queue bound; beyond it: 503'],
  'max-loras': ['maxLoras', 'vLLM --enable-lora --max-loras: adapters in one batch (0: LoRA off)'],
  'max-cpu-loras': ['maxCpuLoras', 'vLLM --max-cpu-loras: adapters kept on the host (max-loras)'],
  'lora-load-ms': ['loraLoadMs', 'cost of loading an adapter not kept on the host (50)'],
};

export const KNOB_OPTIONS: ParseArgsConfig['options'] = {
  ...Object.fromEntries(Object.keys(NUMERIC_FLAGS).map((f) => [f, { type: 'string' as const }])),
  'host': { type: 'string' },
  'model': { type: 'string' },
  'root': { type: 'string' },
  'cache-dtype': { type: 'string' },
  'scheduling-policy': { type: 'string' },
  'kv-model': { type: 'string' },
  'output-tokens': { type: 'string' },
  'no-prompt-tokens-details': { type: 'boolean' },
  'no-prefix-caching': { type: 'boolean' },
  'no-responses-store': { type: 'boolean' },
  'async-scheduling': { type: 'boolean' },
  'roofline': { type: 'boolean' },
  'fault': { type: 'string', multiple: true },
  'lora-modules': { type: 'string', multiple: true },
  'runtime-lora-updating': { type: 'boolean' },
};

export function knobsFromArgs(values: Record<string, unknown>): SimReplicaOptions & { faults: Fault[] } {
  const opts: SimReplicaOptions & { faults: Fault[] } = { faults: [] };
  for (const [flag, [key]] of Object.entries(NUMERIC_FLAGS)) {
    const raw = values[flag];
    if (raw === undefined) continue;
    const v = Number(raw);
    if (!Number.isFinite(v)) throw new Error(`--${flag} needs a number, got ${String(raw)}`);
    (opts as unknown as Record<string, number>)[key] = v;
  }
  if (typeof values.host === 'string') opts.host = values.host;
  if (typeof values.model === 'string') opts.model = values.model;
  if (typeof values.root === 'string') opts.root = values.root;
  if (typeof values['cache-dtype'] === 'string') opts.cacheDtype = values['cache-dtype'];
  const policy = values['scheduling-policy'];
  if (policy !== undefined) {
    if (policy !== 'fcfs' && policy !== 'priority') throw new Error(`--scheduling-policy is fcfs or priority, got ${String(policy)}`);
    opts.schedulingPolicy = policy;
  }
  const kvModel = values['kv-model'];
  if (kvModel !== undefined) {
    if (kvModel !== 'vllm' && kvModel !== 'naive') throw new Error(`--kv-model is vllm or naive, got ${String(kvModel)}`);
    opts.kvModel = kvModel;
  }
  if (typeof values['output-tokens'] === 'string') {
    const [min, max] = values['output-tokens'].split('-').map(Number);
    opts.outputTokens = { min, max: max ?? min };
  }
  if (values['no-prompt-tokens-details']) opts.enablePromptTokensDetails = false;
  if (values['no-prefix-caching']) opts.enablePrefixCaching = false;
  if (values['no-responses-store']) opts.enableResponsesStore = false;
  if (values['async-scheduling']) opts.asyncScheduling = true;
  if (values.roofline) opts.roofline = true;
  for (const f of (values.fault as string[] | undefined) ?? []) opts.faults.push(parseFaultArg(f));
  for (const m of (values['lora-modules'] as string[] | undefined) ?? []) {
    const at = m.indexOf('=');
    if (at <= 0 || at === m.length - 1) throw new Error(`--lora-modules needs name=path, got ${m}`);
    opts.loraModules = { ...opts.loraModules, [m.slice(0, at)]: m.slice(at + 1) };
  }
  if (values['runtime-lora-updating']) opts.runtimeLoraUpdating = true;
  return opts;
}

export function knobHelp(): string {
  const lines = Object.entries(NUMERIC_FLAGS).map(([f, [, help]]) => `  --${f} N`.padEnd(32) + help);
  lines.push(
    '  --host H'.padEnd(32) + 'listen address (127.0.0.1)',
    '  --model NAME'.padEnd(32) + 'served model name',
    '  --root NAME'.padEnd(32) + 'weights behind the served name in /v1/models (the served name)',
    '  --scheduling-policy P'.padEnd(32) + 'vLLM --scheduling-policy: fcfs (default; a priority is refused) or priority',
    '  --kv-model M'.padEnd(32) + "vllm (default): vLLM 0.32's block pool and admission; naive: the model before it was checked",
    '  --cache-dtype D'.padEnd(32) + 'vLLM --kv-cache-dtype as reported in vllm:cache_config_info (auto)',
    '  --output-tokens MIN-MAX'.padEnd(32) + 'natural answer length range (20-60)',
    '  --no-prompt-tokens-details'.padEnd(32) + 'leave usage.prompt_tokens_details out',
    '  --no-prefix-caching'.padEnd(32) + 'disable the prefix cache',
    '  --no-responses-store'.padEnd(32) + 'no VLLM_ENABLE_RESPONSES_API_STORE: /v1/responses stores nothing',
    '  --async-scheduling'.padEnd(32) + "vLLM's async scheduling: an arrival during a step waits for the next one too",
    '  --roofline'.padEnd(32) + "a step's prefill work overlaps its fixed cost (max, not sum): lenient for small chunks",
    '  --fault KIND[:k=v,...]'.padEnd(32) + 'fault at start, repeatable (e.g. slow:factor=3)',
    '  --lora-modules NAME=PATH'.padEnd(32) + 'vLLM --lora-modules: an adapter served from the start, repeatable',
    '  --runtime-lora-updating'.padEnd(32) + 'VLLM_ALLOW_RUNTIME_LORA_UPDATING=1: /v1/load_lora_adapter and /v1/unload_lora_adapter',
  );
  return lines.join('\n');
}
