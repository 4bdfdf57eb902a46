import type { LoraSlots } from '../routing/types.js';
import { loraSlotsOf } from './lora-info.js';
import { labelsOf } from './replica-config.js';

/** The load figures routing reads from a vLLM replica's Prometheus /metrics. */
export interface VllmStats {
  waiting: number;
  running: number;
  /** 0..1 */
  kvUsage: number;
  /** num_gpu_blocks × block_size from vllm:cache_config_info; null when absent. */
  kvCapacityTokens: number | null;
  /** process_start_time_seconds: a new value means the replica restarted (its cache is gone). */
  startTimeSeconds: number | null;
  /** vllm:prefix_cache_queries_total: going backwards also means a restart. */
  prefixQueries: number | null;
  /** The labels of the first vllm:cache_config_info sample (the fleet configuration audit); null when absent. */
  cacheConfigLabels: Record<string, string> | null;
  /** vllm:lora_requests_info's current label set (its largest value); null when LoRA is off. */
  lora: LoraSlots | null;
}

const SAMPLE = /^(vllm:[a-z_]+)(\{[^}]*\})?\s+(\S+)/;
const START_TIME = /^process_start_time_seconds(?:\{[^}]*\})?\s+(\S+)/m;

function label(labels: string, name: string): string | null {
  const m = new RegExp(`(?:^|[{,])${name}="([^"]*)"`).exec(labels);
  return m ? m[1] : null;
}

/**
 * Sums the samples over every engine/model a replica reports (vLLM V1 names; the V0 name
 * `vllm:gpu_cache_usage_perc` is read too). Returns null when the text has none of them, so a
 * non-vLLM upstream is noticed rather than read as idle.
 */
export function parseVllmMetrics(text: string): VllmStats | null {
  const s: VllmStats = { waiting: 0, running: 0, kvUsage: 0, kvCapacityTokens: null, startTimeSeconds: null, prefixQueries: null, cacheConfigLabels: null, lora: null };
  let seen = false;
  let loraAt = -Infinity;
  let kvSamples = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith('vllm:')) continue;
    const m = SAMPLE.exec(line);
    if (!m) continue;
    const value = Number(m[3]);
    if (!Number.isFinite(value)) continue;
    switch (m[1]) {
      case 'vllm:num_requests_waiting': s.waiting += value; seen = true; break;
      case 'vllm:num_requests_running': s.running += value; seen = true; break;
      case 'vllm:kv_cache_usage_perc':
      case 'vllm:gpu_cache_usage_perc': s.kvUsage += value; kvSamples++; seen = true; break;
      case 'vllm:lora_requests_info': {
        // Every label set it ever had stays exposed; the latest reading has the largest value.
        if (value <= loraAt) break;
        const slots = loraSlotsOf(m[2] ?? '');
        if (slots === null) break;
        loraAt = value;
        s.lora = slots;
        break;
      }
      case 'vllm:prefix_cache_queries_total': s.prefixQueries = (s.prefixQueries ?? 0) + value; break;
      case 'vllm:cache_config_info': {
        const blocks = Number(label(m[2] ?? '', 'num_gpu_blocks'));
        const size = Number(label(m[2] ?? '', 'block_size'));
        // One of num_gpu_blocks is vLLM's null block, which never holds KV (v1/core/block_pool.py).
        if (blocks > 1 && size > 0) s.kvCapacityTokens = (s.kvCapacityTokens ?? 0) + (blocks - 1) * size;
        s.cacheConfigLabels ??= labelsOf(m[2] ?? '');
        seen = true;
        break;
      }
    }
  }
  if (kvSamples > 1) s.kvUsage /= kvSamples;
  const start = START_TIME.exec(text);
  if (start && Number.isFinite(Number(start[1]))) s.startTimeSeconds = Number(start[1]);
  return seen ? s : null;
}
