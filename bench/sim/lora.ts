// LoRA adapters on a simulated replica, as vLLM V1 serves them with --enable-lora:
// - `--max-loras N`: at most N distinct adapters in one batch. A waiting request whose adapter is
//   neither running nor has a free slot is skipped by the scheduler (others behind it still go),
//   so it waits until a running adapter's requests are all done;
// - `--max-cpu-loras M`: adapters kept loaded on the host (least recently used beyond); a request
//   for one that is not pays `loraLoadMs` before it reaches the engine queue;
// - `--lora-modules name=path`: served from the start, listed in /v1/models with `parent`;
// - VLLM_ALLOW_RUNTIME_LORA_UPDATING=1: POST /v1/load_lora_adapter and /v1/unload_lora_adapter;
// - `vllm:lora_requests_info{max_lora, running_lora_adapters, waiting_lora_adapters}`: a gauge set
//   to the time of each reading, every label set it ever had still exposed.

import { existsSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import { errors, errorJson, type HttpError } from './errors.js';
import { fnv1a } from './hash.js';
import type { Seq } from './sequence.js';

export interface LoraKnobs {
  /** vLLM --max-loras; 0: LoRA off (--enable-lora not given). */
  maxLoras: number;
  /** vLLM --max-cpu-loras (vLLM's default: max_loras). */
  maxCpuLoras: number;
  /** vLLM --lora-modules: adapter name → path, served from the start. */
  loraModules: Readonly<Record<string, string>>;
  /** What loading an adapter not cached on the host costs (from disk), ms. */
  loraLoadMs: number;
  /** VLLM_ALLOW_RUNTIME_LORA_UPDATING=1: the load and unload routes exist. */
  runtimeLoraUpdating: boolean;
  /** A runtime load reads `lora_path` from this host's disk, as vLLM does: a path that is not there fails (off: any path loads). */
  checkLoraPaths: boolean;
}

/** Label sets of vllm:lora_requests_info kept (vLLM keeps them all; the sim drops the oldest). */
const MAX_INFO_SERIES = 64;

export interface LoraState {
  readonly enabled: boolean;
  /** Whether `model` names an adapter this replica serves. */
  has(model: string): boolean;
  /** /v1/models entries of the adapters. */
  modelEntries(base: string, created: number): unknown[];
  /** The cost of making the adapter ready on the host (0 when cached), ms; marks it recently used. */
  prepare(adapter: string): number;
  /** The scheduler's question: may this waiting sequence join the batch beside `running`? */
  admits(seq: Seq, running: readonly Seq[]): boolean;
  /** A sequence of an adapter entered the engine: counted in the info gauge while it lives. */
  track(seq: Seq): void;
  metricsText(): string;
  /** The adapters running and waiting now (what vllm:lora_requests_info says), for a virtual-time run's scrape. */
  slots(): { running: ReadonlySet<string>; waiting: ReadonlySet<string> };
  /** Runtime loads and unloads answered, successful or not. */
  readonly calls: { load: number; unload: number };
  /** POST /v1/load_lora_adapter and /v1/unload_lora_adapter; false when the path is not one of them. */
  route(path: string, body: string, res: ServerResponse, send: (res: ServerResponse, e: HttpError) => void): boolean;
}

/** Mixed into the root of a sequence's block hashes: vLLM's block hashes differ per adapter. */
export function loraRoot(root: number, adapter: string | null): number {
  if (adapter === null) return root;
  // The salt's high lane stays; the low lane is rehashed with the adapter's name.
  return Math.floor(root / 0x100000000) * 0x100000000 + fnv1a(`lora:${adapter}`, root >>> 0);
}

const ok = (status: number, body: string): HttpError => ({ status, body });

export function createLoraState(k: LoraKnobs): LoraState {
  const adapters = new Map<string, string>(Object.entries(k.loraModules));
  // Host cache, least recently used first (Map order). vLLM loads the --lora-modules at start.
  const cpu = new Map<string, true>();
  const cacheOnHost = (name: string) => {
    cpu.delete(name);
    cpu.set(name, true);
    while (cpu.size > Math.max(1, k.maxCpuLoras)) cpu.delete(cpu.keys().next().value as string);
  };
  for (const name of adapters.keys()) cacheOnHost(name);
  const live = new Set<Seq>();
  const series = new Map<string, number>();
  let lastValue = 0;

  function names(status: Seq['status']): string {
    const out = new Set<string>();
    for (const s of live) {
      if (s.status === 'finished' || s.status === 'aborted') live.delete(s);
      else if (s.status === status && s.lora !== null) out.add(s.lora);
    }
    return [...out].sort().join(',');
  }

  const calls = { load: 0, unload: 0 };
  return {
    calls,
    enabled: k.maxLoras > 0,
    has: (model) => adapters.has(model),
    modelEntries: (base, created) => [...adapters].map(([id, path]) => ({
      id, object: 'model', created, owned_by: 'vllm', root: path, parent: base, max_model_len: null, permission: [],
    })),
    prepare(adapter) {
      const cached = cpu.has(adapter);
      cacheOnHost(adapter);
      return cached ? 0 : k.loraLoadMs;
    },
    admits(seq, running) {
      if (seq.lora === null) return true;
      const inBatch = new Set<string>();
      for (const r of running) if (r.lora !== null) inBatch.add(r.lora);
      return inBatch.has(seq.lora) || inBatch.size < k.maxLoras;
    },
    track: (seq) => void live.add(seq),
    slots() {
      const set = (s: string) => new Set(s === '' ? [] : s.split(','));
      return { waiting: set(names('waiting')), running: set(names('running')) };
    },
    metricsText() {
      if (k.maxLoras <= 0) return '';
      const waiting = names('waiting');
      const running = names('running');
      const key = `max_lora="${k.maxLoras}",running_lora_adapters="${running}",waiting_lora_adapters="${waiting}"`;
      // Strictly later than any earlier reading, so the current set is always the largest.
      lastValue = Math.max(Date.now() / 1000, lastValue + 0.001);
      series.delete(key);
      series.set(key, lastValue);
      while (series.size > MAX_INFO_SERIES) series.delete(series.keys().next().value as string);
      const lines = ['# HELP vllm:lora_requests_info Running stats on lora requests.', '# TYPE vllm:lora_requests_info gauge'];
      for (const [labels, v] of series) lines.push(`vllm:lora_requests_info{${labels}} ${v}`);
      return `${lines.join('\n')}\n`;
    },
    route(path, body, res, send) {
      if (path !== '/v1/load_lora_adapter' && path !== '/v1/unload_lora_adapter') return false;
      if (!k.runtimeLoraUpdating || k.maxLoras <= 0) {
        send(res, errors.notFound());
        return true;
      }
      let b: { lora_name?: unknown; lora_path?: unknown };
      try {
        b = JSON.parse(body || '{}') as typeof b;
      } catch {
        send(res, errors.badRequest('Invalid JSON body'));
        return true;
      }
      const name = typeof b.lora_name === 'string' && b.lora_name !== '' ? b.lora_name : null;
      if (path === '/v1/load_lora_adapter') {
        calls.load++;
        const where = typeof b.lora_path === 'string' && b.lora_path !== '' ? b.lora_path : null;
        if (name === null || where === null) send(res, errors.badRequest("Both 'lora_name' and 'lora_path' must be provided."));
        else if (adapters.has(name)) send(res, errors.badRequest(`The lora adapter '${name}' has already been loaded.`));
        else if (k.checkLoraPaths && !existsSync(where)) send(res, ok(404, errorJson(`Loading lora ${name} failed: No adapter found for ${where}`, 'NotFoundError', 404, null)));
        else {
          adapters.set(name, where);
          const cost = this.prepare(name);
          // Loading reads the adapter from disk onto the host before the route answers.
          setTimeout(() => send(res, ok(200, `Success: LoRA adapter '${name}' added successfully.`)), cost);
        }
        return true;
      }
      calls.unload++;
      if (name === null) send(res, errors.badRequest("'lora_name' needs to be provided to unload a LoRA adapter."));
      else if (!adapters.delete(name)) send(res, ok(404, errorJson(`The lora adapter '${name}' cannot be found.`, 'NotFoundError', 404, 'lora_name')));
      else {
        cpu.delete(name);
        send(res, ok(200, `Success: LoRA adapter '${name}' removed successfully.`));
      }
      return true;
    },
  };
}
