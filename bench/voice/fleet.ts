// The processes of a run: the simulated vLLM fleet (one child, the sim CLI) and one warmroute
// gateway child per strategy, each on its own event loop as in production; and what is read from
// them: the vLLM prefix-cache counters, the gateway's own overhead histogram, in-flight samples.

import { freePort, startChild, startChildLines, TSX, type Child } from '../lib/procs.js';
import { histogramQuantile } from '../lib/prom.js';
import { startWarmroute, type Target } from '../overhead/targets.js';

// No admin call may hang a run: loopback answers in milliseconds or something is wrong.
const TIMEOUT_MS = 10_000;

/** fetch, whose failures name the URL: undici's own message is only "fetch failed". */
async function call(url: string, init: RequestInit = {}, timeoutMs = TIMEOUT_MS): Promise<Response> {
  try {
    return await fetch(url, { ...init, signal: AbortSignal.timeout(timeoutMs) });
  } catch (e) {
    throw new Error(`${init.method ?? 'GET'} ${url} failed`, { cause: e });
  }
}

export interface Fleet {
  urls: string[];
  /** Empties every replica's KV cache and zeroes its counters (POST /sim/reset). */
  reset(): Promise<void>;
  prefixCounters(): Promise<PrefixCounters>;
  stop(): Promise<void>;
}

export interface PrefixCounters {
  queries: number;
  hits: number;
}

/** `kvBlocks`: the simulator's KV capacity per replica (undefined: its H100 default). */
export async function startSimFleet(replicas: number, outputTokens: [number, number], kvBlocks?: number): Promise<Fleet> {
  const args = [...TSX, 'bench/sim/cli.ts', '--replicas', String(replicas), '--output-tokens', `${outputTokens[0]}-${outputTokens[1]}`];
  if (kvBlocks !== undefined) args.push('--kv-blocks', String(kvBlocks));
  const child: Child & { lines: string[] } = await startChildLines(process.execPath, args, /^http:\/\//, replicas, { timeoutMs: 30_000 });
  const urls = child.lines.map((l) => l.trim());
  return {
    urls,
    async reset() {
      await Promise.all(urls.map(async (u) => {
        const r = await call(`${u}/sim/reset`, { method: 'POST' });
        await r.arrayBuffer();
        if (!r.ok) throw new Error(`${u}/sim/reset: HTTP ${r.status}`);
      }));
    },
    async prefixCounters() {
      const texts = await Promise.all(urls.map(async (u) => (await call(`${u}/metrics`)).text()));
      return {
        queries: texts.reduce((s, t) => s + sumSamples(t, 'vllm:prefix_cache_queries_total'), 0),
        hits: texts.reduce((s, t) => s + sumSamples(t, 'vllm:prefix_cache_hits_total'), 0),
      };
    },
    stop: () => child.stop(),
  };
}

/** Sum of every sample of a metric in Prometheus text (all label sets). */
export function sumSamples(text: string, name: string): number {
  let sum = 0;
  const esc = name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  for (const m of text.matchAll(new RegExp(`^${esc}(?:\\{[^}]*\\})? (\\S+)`, 'gm'))) sum += Number(m[1]);
  return sum;
}

export interface Gateway {
  url: string;
  adminUrl: string;
  /** Why the gateway is gone if it exited before stop() (and its last output), else null. */
  died(): string | null;
  stop(): Promise<void>;
}

interface AdminReplicas {
  replicas: { name: string; state: string; inflight: number; models: string[] | null }[];
}

export async function startGateway(urls: string[], strategy: string, more: string[] = []): Promise<Gateway> {
  const extra = [...urls.slice(1).flatMap((u) => ['--upstream', u]), '--strategy', strategy, '--log-level', 'warn', ...more];
  const t: Target = await startWarmroute(urls[0], extra);
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
  // Ready once every replica is up and its model list is known (bounded wait).
  const deadline = Date.now() + 10_000;
  for (;;) {
    const r = (await (await call(`${adminUrl}/admin/replicas`)).json()) as AdminReplicas;
    if (r.replicas.every((x) => x.state === 'up' && x.models !== null)) break;
    if (Date.now() > deadline) break;
    await new Promise((res) => setTimeout(res, 100));
  }
  return {
    url: t.url, adminUrl, died: () => died,
    stop: () => {
      stopping = true;
      return t.child!.stop();
    },
  };
}

/** A throwaway redis-server child on a free loopback port, for several gateways to share pins. */
export async function startRedisServer(): Promise<{ url: string; stop(): Promise<void> }> {
  const port = await freePort();
  const child = await startChild('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], /Ready to accept connections/, { timeoutMs: 10_000 });
  return { url: `redis://127.0.0.1:${port}`, stop: () => child.stop() };
}

export interface GatewayMetrics {
  overheadP50Ms: number | null;
  overheadP99Ms: number | null;
  decisions: Record<string, number>;
}

export async function gatewayMetrics(adminUrl: string): Promise<GatewayMetrics> {
  const text = await (await call(`${adminUrl}/metrics`)).text();
  const q = (p: number) => {
    const v = histogramQuantile(text, 'warmroute_gateway_overhead_seconds', p);
    return v === null ? null : v * 1000;
  };
  const decisions: Record<string, number> = {};
  for (const m of text.matchAll(/^warmroute_route_decisions_total\{reason="([^"]+)"\} (\S+)$/gm)) {
    if (Number(m[2]) > 0) decisions[m[1]] = Number(m[2]);
  }
  return { overheadP50Ms: q(0.5), overheadP99Ms: q(0.99), decisions };
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
