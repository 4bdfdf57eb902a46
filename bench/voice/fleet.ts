// The processes of a run: the simulated vLLM fleet (one child, the sim CLI) and one warmroute
// gateway child per strategy, each on its own event loop as in production; and what is read from
// them: the vLLM prefix-cache counters, the gateway's own overhead histogram, in-flight samples.

import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { call } from '../lib/http.js';
import { startChildLines, TSX, type Child } from '../lib/procs.js';
import { histogramQuantile, sumBy, sumSamples } from '../lib/prom.js';
import { startWarmroute, type Target } from '../overhead/targets.js';

// Re-exported: test/bench/e2e.test.ts reads the replicas' counters with it from here.
export { sumSamples };

/** Where a simulated replica publishes its KV events (`--kv-events`). */
export interface KvEndpoint {
  endpoint: string;
  replayEndpoint: string;
}

export interface Fleet {
  urls: string[];
  /** Per replica, when the fleet publishes KV events; else null. */
  kvEvents: KvEndpoint[] | null;
  /** Empties every replica's KV cache and zeroes its counters (POST /sim/reset). */
  reset(): Promise<void>;
  prefixCounters(): Promise<PrefixCounters>;
  stop(): Promise<void>;
}

export interface PrefixCounters {
  queries: number;
  hits: number;
}

/**
 * `kvBlocks`: the simulator's KV capacity per replica (undefined: its H100 default); `kvPad`: with
 * KV events, blocks published after each stored one that no pool holds (the sim's --kv-events-pad);
 * `otlpTracesUrl`: each replica exports an llm_request span per request there (vLLM's --otlp-traces-endpoint).
 */
export async function startSimFleet(replicas: number, outputTokens: [number, number], kvBlocks?: number, kvEvents = false, kvPad = 0, otlpTracesUrl?: string): Promise<Fleet> {
  const args = [...TSX, 'bench/sim/cli.ts', '--replicas', String(replicas), '--output-tokens', `${outputTokens[0]}-${outputTokens[1]}`];
  if (kvBlocks !== undefined) args.push('--kv-blocks', String(kvBlocks));
  if (kvEvents) args.push('--kv-events');
  if (kvEvents && kvPad > 0) args.push('--kv-events-pad', String(kvPad));
  if (otlpTracesUrl) args.push('--otlp-traces-endpoint', otlpTracesUrl);
  const child: Child & { lines: string[] } = await startChildLines(process.execPath, args, /^http:\/\//, replicas, { timeoutMs: 30_000 });
  const urls = child.lines.map((l) => l.trim());
  const endpoints = kvEvents
    ? await Promise.all(urls.map(async (u) => ((await (await call(`${u}/sim/state`)).json()) as { kvEvents: KvEndpoint }).kvEvents))
    : null;
  return {
    urls,
    kvEvents: endpoints,
    async reset() {
      await Promise.all(urls.map(async (u) => (await call(`${u}/sim/reset`, { method: 'POST' })).arrayBuffer()));
    },
    async prefixCounters() {
      const texts = await Promise.all(urls.map(async (u) => (await call(`${u}/metrics`)).text()));
      return { queries: sumSamples(texts, 'vllm:prefix_cache_queries_total'), hits: sumSamples(texts, 'vllm:prefix_cache_hits_total') };
    },
    stop: () => child.stop(),
  };
}

export interface Gateway {
  url: string;
  adminUrl: string;
  /** Why the gateway is gone if it exited before stop() (and its last output), else null. */
  died(): string | null;
  /** What it wrote last (up to 2,000 characters): its warnings, when a run fails. */
  lastOutput(): string;
  stop(): Promise<void>;
  pid: number | null;
}

interface AdminReplicas {
  replicas: { name: string; state: string; inflight: number; models: string[] | null }[];
}

/**
 * `kvEvents`: the gateway reads each replica's KV events; `config`: settings for its config file.
 * With either, the upstreams come from that one file too (a second --config would replace it).
 * `readyMs`: how long it may take to see every replica up (hundreds of replicas take longer).
 */
export async function startGateway(urls: string[], strategy: string, more: string[] = [], kvEvents: KvEndpoint[] | null = null, config: Record<string, unknown> | null = null, readyMs = 10_000): Promise<Gateway> {
  let t: Target;
  if (kvEvents === null && config === null) {
    t = await startWarmroute(urls[0], [...urls.slice(1).flatMap((u) => ['--upstream', u]), '--strategy', strategy, '--log-level', 'warn', ...more], undefined, 'warmroute', undefined, Math.max(readyMs, 20_000));
  } else {
    const file = join(tmpdir(), `warmroute-bench-${process.pid}-${Date.now()}.json`);
    // `config.upstreams[i]` adds settings (a name) to the i-th url's entry.
    const named = (config?.upstreams as Record<string, unknown>[] | undefined) ?? [];
    const upstreams = urls.map((url, i) => ({ ...named[i], url, ...(kvEvents === null ? {} : { kvEvents: kvEvents[i] }) }));
    writeFileSync(file, JSON.stringify({ ...config, upstreams }));
    t = await startWarmroute('', ['--config', file, '--strategy', strategy, '--log-level', 'warn', ...more], undefined, 'warmroute', undefined, Math.max(readyMs, 20_000));
  }
  const adminUrl = t.adminUrl!;
  const proc = t.child!.proc;
  // A gateway that dies mid-run turns every later request into ECONNREFUSED: keep what it said
  // last, so the run fails with its reason instead of a bare "fetch failed" on the next admin call.
  let tail = '';
  const keep = (d: Buffer) => { tail = (tail + d.toString()).slice(-2000); };
  proc.stdout?.on('data', keep);
  proc.stderr?.on('data', keep);
  let stopping = false;
  let died: string | null = null;
  proc.once('exit', (code, signal) => {
    if (!stopping) died = `exited (code ${code}, signal ${signal}) before it was stopped; its last output:\n${tail.trim() || '(none)'}`;
  });
  // Ready once every replica is up and its model list is known (bounded wait; a gateway that never
  // gets there fails the run rather than measuring a fleet it only half sees).
  const deadline = Date.now() + readyMs;
  for (;;) {
    const r = (await (await call(`${adminUrl}/admin/replicas`)).json()) as AdminReplicas;
    if (r.replicas.every((x) => x.state === 'up' && x.models !== null)) break;
    if (Date.now() > deadline) {
      await t.child!.stop();
      throw new Error(`the ${strategy} gateway did not see every replica up within ${readyMs / 1000} s: ${r.replicas.map((x) => `${x.name} ${x.state}${x.models === null ? ' (no model list)' : ''}`).join(', ')}`);
    }
    await new Promise((res) => setTimeout(res, 100));
  }
  return {
    url: t.url, adminUrl, died: () => died, lastOutput: () => tail, pid: proc.pid ?? null,
    stop: () => {
      stopping = true;
      return t.child!.stop();
    },
  };
}

export interface GatewayMetrics {
  overheadP50Ms: number | null;
  overheadP99Ms: number | null;
  decisions: Record<string, number>;
}

/**
 * The gateway's own figures from its /metrics; given several gateways (one fleet, pins shared),
 * their overhead histograms are merged bucket by bucket before the quantiles are taken and their
 * route decisions summed, so the figures are those of every request, whichever gateway took it.
 */
export async function gatewayMetrics(adminUrls: string | readonly string[]): Promise<GatewayMetrics> {
  const texts = await Promise.all((typeof adminUrls === 'string' ? [adminUrls] : adminUrls).map(async (u) => (await call(`${u}/metrics`)).text()));
  const q = (p: number) => {
    const v = histogramQuantile(texts, 'warmroute_gateway_overhead_seconds', p);
    return v === null ? null : v * 1000;
  };
  const decisions = Object.fromEntries(Object.entries(sumBy(texts, 'warmroute_route_decisions_total', 'reason')).filter(([, v]) => v > 0));
  return { overheadP50Ms: q(0.5), overheadP99Ms: q(0.99), decisions };
}

/** Sums (seconds) and counts of the gateway's hop histograms and its TTFT, for deltas over a run. */
export interface GatewayTimes {
  hops: Record<string, { sum: number; count: number }>;
  ttft: { sum: number; count: number };
}

export async function gatewayTimes(adminUrl: string): Promise<GatewayTimes> {
  const text = await (await call(`${adminUrl}/metrics`)).text();
  const sums = sumBy(text, 'warmroute_hop_duration_seconds_sum', 'hop');
  const counts = sumBy(text, 'warmroute_hop_duration_seconds_count', 'hop');
  const hops: GatewayTimes['hops'] = {};
  for (const h of Object.keys(counts)) hops[h] = { sum: sums[h] ?? 0, count: counts[h] };
  return { hops, ttft: { sum: sumSamples(text, 'warmroute_ttft_seconds_sum'), count: sumSamples(text, 'warmroute_ttft_seconds_count') } };
}

export interface InflightSampler {
  /** Stops sampling; resolves with per-replica peak and mean in flight. */
  stop(): Promise<{ peak: Record<string, number>; mean: Record<string, number>; samples: number }>;
}

/** Polls /admin/replicas every `everyMs` until stopped (and at most `maxMs`). */
export function sampleInflight(adminUrl: string, everyMs: number, maxMs: number): InflightSampler {
  const peak: Record<string, number> = {};
  const sum: Record<string, number> = {};
  let samples = 0;
  let stopped = false;
  const started = Date.now();
  const loop = (async () => {
    while (!stopped && Date.now() - started < maxMs) {
      try {
        const r = (await (await call(`${adminUrl}/admin/replicas`, {}, everyMs * 4)).json()) as AdminReplicas;
        samples++;
        for (const x of r.replicas) {
          peak[x.name] = Math.max(peak[x.name] ?? 0, x.inflight);
          sum[x.name] = (sum[x.name] ?? 0) + x.inflight;
        }
      } catch { /* a missed sample is not worth failing the run */ }
      await new Promise((res) => setTimeout(res, everyMs));
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      const mean = Object.fromEntries(Object.entries(sum).map(([k, v]) => [k, samples ? v / samples : 0]));
      return { peak, mean, samples };
    },
  };
}
