// /metrics in the text format vLLM's prometheus_client produces: vLLM V1 names, labels sorted
// (engine, model_name), counters as <name>_total plus a <name>_created gauge, floats as Python
// prints them. Hand-written: a scrape of a few dozen series is cheaper than a registry per replica.

import type { SimConfig } from './config.js';

const TTFT_BUCKETS = [
  0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
  160.0, 640.0, 2560.0,
];
const REQUEST_LATENCY_BUCKETS = [
  0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0,
  1920.0, 7680.0,
];
const FINISH_REASONS = ['stop', 'length', 'abort'] as const;

export function fmt(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (!Number.isFinite(v)) return v > 0 ? '+Inf' : '-Inf';
  if (Number.isInteger(v) && Math.abs(v) < 1e16) return `${v}.0`;
  return String(v);
}

function labels(l: Record<string, string>): string {
  const keys = Object.keys(l).sort();
  const esc = (s: string) => s.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
  return `{${keys.map((k) => `${k}="${esc(l[k])}"`).join(',')}}`;
}

export interface Histogram {
  observe(v: number): void;
  render(name: string, help: string, base: Record<string, string>, created: number): string;
}

export function createHistogram(bounds: readonly number[]): Histogram {
  const counts = new Array<number>(bounds.length).fill(0);
  let sum = 0;
  let count = 0;
  return {
    observe(v) {
      for (let i = 0; i < bounds.length; i++) if (v <= bounds[i]) counts[i]++;
      sum += v;
      count++;
    },
    render(name, help, base, created) {
      const lines = [`# HELP ${name} ${help}`, `# TYPE ${name} histogram`];
      bounds.forEach((b, i) => lines.push(`${name}_bucket${labels({ ...base, le: fmt(b) })} ${fmt(counts[i])}`));
      lines.push(`${name}_bucket${labels({ ...base, le: '+Inf' })} ${fmt(count)}`);
      lines.push(`${name}_count${labels(base)} ${fmt(count)}`);
      lines.push(`${name}_sum${labels(base)} ${fmt(sum)}`);
      lines.push(`# HELP ${name}_created ${help}`, `# TYPE ${name}_created gauge`);
      lines.push(`${name}_created${labels(base)} ${fmt(created)}`);
      return lines.join('\n');
    },
  };
}

export interface MetricsState {
  prefixCacheQueries: number;
  prefixCacheHits: number;
  promptTokens: number;
  generationTokens: number;
  preemptions: number;
  success: Record<(typeof FINISH_REASONS)[number], number>;
  ttft: Histogram;
  e2e: Histogram;
  queue: Histogram;
}

export interface Gauges {
  running: number;
  waiting: number;
  kvUsage: number;
}

export interface Metrics {
  state: MetricsState;
  render(g: Gauges): string;
  reset(): void;
  /** A new process: process_start_time_seconds moves on (a gateway reads a restart from it). */
  restarted(): void;
}

export function createMetrics(cfg: SimConfig): Metrics {
  const base = { engine: '0', model_name: cfg.model };
  let created = Date.now() / 1000;
  // Python's prometheus_client exports the process start time; a restarted vLLM shows a new one.
  let startTime = created;
  const fresh = (): MetricsState => ({
    prefixCacheQueries: 0,
    prefixCacheHits: 0,
    promptTokens: 0,
    generationTokens: 0,
    preemptions: 0,
    success: { stop: 0, length: 0, abort: 0 },
    ttft: createHistogram(TTFT_BUCKETS),
    e2e: createHistogram(REQUEST_LATENCY_BUCKETS),
    queue: createHistogram(REQUEST_LATENCY_BUCKETS),
  });
  const metrics: Metrics = {
    state: fresh(),
    reset() {
      metrics.state = fresh();
      created = Date.now() / 1000;
    },
    restarted() {
      // Strictly later even within one clock tick, so a restart is always visible.
      startTime = Math.max(Date.now() / 1000, startTime + 0.001);
    },
    render(g) {
      const s = metrics.state;
      const out: string[] = [];
      const gauge = (name: string, help: string, v: number, l: Record<string, string> = base) =>
        out.push(`# HELP ${name} ${help}`, `# TYPE ${name} gauge`, `${name}${labels(l)} ${fmt(v)}`);
      const counter = (name: string, help: string, series: [Record<string, string>, number][]) => {
        out.push(`# HELP ${name}_total ${help}`, `# TYPE ${name}_total counter`);
        for (const [l, v] of series) out.push(`${name}_total${labels(l)} ${fmt(v)}`);
        out.push(`# HELP ${name}_created ${help}`, `# TYPE ${name}_created gauge`);
        for (const [l] of series) out.push(`${name}_created${labels(l)} ${fmt(created)}`);
      };
      out.push('# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.', '# TYPE process_start_time_seconds gauge', `process_start_time_seconds ${fmt(startTime)}`);
      gauge('vllm:num_requests_running', 'Number of requests in model execution batches.', g.running);
      gauge('vllm:num_requests_waiting', 'Number of requests waiting to be processed.', g.waiting);
      gauge('vllm:kv_cache_usage_perc', 'KV-cache usage. 1 means 100 percent usage.', g.kvUsage);
      counter('vllm:prefix_cache_queries', 'Prefix cache queries, in terms of number of queried tokens.', [
        [base, s.prefixCacheQueries],
      ]);
      counter('vllm:prefix_cache_hits', 'Prefix cache hits, in terms of number of cached tokens.', [
        [base, s.prefixCacheHits],
      ]);
      counter('vllm:num_preemptions', 'Cumulative number of preemption from the engine.', [[base, s.preemptions]]);
      counter('vllm:prompt_tokens', 'Number of prefill tokens processed.', [[base, s.promptTokens]]);
      counter('vllm:generation_tokens', 'Number of generation tokens processed.', [[base, s.generationTokens]]);
      counter(
        'vllm:request_success',
        'Count of successfully processed requests.',
        FINISH_REASONS.map((r) => [{ ...base, finished_reason: r }, s.success[r]]),
      );
      out.push(s.ttft.render('vllm:time_to_first_token_seconds', 'Histogram of time to first token in seconds.', base, created));
      out.push(s.e2e.render('vllm:e2e_request_latency_seconds', 'Histogram of e2e request latency in seconds.', base, created));
      out.push(
        s.queue.render('vllm:request_queue_time_seconds', 'Histogram of time spent in WAITING phase for request.', base, created),
      );
      gauge('vllm:cache_config_info', 'Information of the LLMEngine CacheConfig', 1, {
        block_size: String(cfg.blockSize),
        cache_dtype: cfg.cacheDtype,
        calculate_kv_scales: 'False',
        cpu_offload_gb: '0',
        enable_prefix_caching: cfg.enablePrefixCaching ? 'True' : 'False',
        engine: '0',
        gpu_memory_utilization: '0.9',
        is_attention_free: 'False',
        num_cpu_blocks: 'None',
        num_gpu_blocks: String(cfg.kvBlocks),
        num_gpu_blocks_override: 'None',
        prefix_caching_hash_algo: 'sha256',
        sliding_window: 'None',
        swap_space: '4',
      });
      return `${out.join('\n')}\n`;
    },
  };
  return metrics;
}
