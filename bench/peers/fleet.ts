// The fleet bench:peers measures on: the simulator (started and stopped here), the real vLLM fleet
// that `npm run fleet:vllm` wrote down (used read-only, never stopped), or upstreams given by URL.
// Every kind reads the replicas' own prefix-cache counters, the names vLLM exports.

import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { call } from '../lib/http.js';
import { effectiveNice } from '../lib/procs.js';
import { sumSamples } from '../lib/prom.js';
import { startSimFleet, type KvEndpoint, type PrefixCounters } from '../voice/fleet.js';
import { MODEL } from '../voice/conversation.js';

export const VLLM_FLEET_FILE = join(homedir(), '.cache/warmroute/fleet/vllm.json');

export interface PeerFleet {
  kind: 'sim' | 'vllm' | 'upstream';
  urls: string[];
  /** The served model name the requests must carry. */
  model: string;
  /** Where each replica publishes its KV events (in fleet order), when it does; else null. */
  kvEvents: KvEndpoint[] | null;
  /**
   * Empties every replica's prefix cache before a strategy runs. False when the fleet has no way
   * to (a real vLLM outside dev mode): the bench then gives each strategy prompts of its own.
   */
  reset(): Promise<boolean>;
  prefixCounters(): Promise<PrefixCounters>;
  /** Prompt tokens each replica has been asked for so far (its vllm:prefix_cache_queries), in fleet order. */
  queriesByReplica(): Promise<number[]>;
  /** The replicas' own request-phase histograms so far, summed over the fleet. */
  engineTimes(): Promise<EngineTimes>;
  /** The replicas' CPU priority as the scheduler sees it, when they are processes of this machine that say. */
  replicaNice?: number | null;
  /** KV capacity per replica in tokens, from vllm:cache_config_info (null if not exported). */
  capacityTokens(): Promise<number | null>;
  /**
   * The served model's tokens per workload token (the workload counts 4 characters a token, as the
   * simulator does): what a real tokenizer makes of the same text, measured on one request.
   */
  tokenRatio(): Promise<number>;
  /** Every replica's /health answers 200. */
  healthy(): Promise<boolean>;
  /** Stops what this process started; a fleet it found running is left alone. */
  stop(): Promise<void>;
}

async function metricsTexts(urls: readonly string[]): Promise<string[]> {
  return Promise.all(urls.map(async (u) => (await call(`${u}/metrics`)).text()));
}

async function counters(urls: readonly string[]): Promise<PrefixCounters> {
  const texts = await metricsTexts(urls);
  return { queries: sumSamples(texts, 'vllm:prefix_cache_queries_total'), hits: sumSamples(texts, 'vllm:prefix_cache_hits_total') };
}

/** Sum (seconds) and count of one vLLM request-phase histogram. */
export interface PhaseTotal {
  sum: number;
  count: number;
}

/**
 * What the replicas themselves measured: TTFT from the request's arrival in the server, its time
 * waiting for the scheduler, its prefill. Set against the client's TTFT through a router, they
 * tell the engine's share of it from everything before and around the engine.
 */
export interface EngineTimes {
  ttft: PhaseTotal;
  queue: PhaseTotal;
  prefill: PhaseTotal;
}

export const ENGINE_PHASES: Record<keyof EngineTimes, string> = {
  ttft: 'vllm:time_to_first_token_seconds',
  queue: 'vllm:request_queue_time_seconds',
  prefill: 'vllm:request_prefill_time_seconds',
};

async function engineTimes(urls: readonly string[]): Promise<EngineTimes> {
  const texts = await metricsTexts(urls);
  const phase = (name: string): PhaseTotal => ({ sum: sumSamples(texts, `${name}_sum`), count: sumSamples(texts, `${name}_count`) });
  return { ttft: phase(ENGINE_PHASES.ttft), queue: phase(ENGINE_PHASES.queue), prefill: phase(ENGINE_PHASES.prefill) };
}

async function queriesByReplica(urls: readonly string[]): Promise<number[]> {
  return (await metricsTexts(urls)).map((t) => sumSamples(t, 'vllm:prefix_cache_queries_total'));
}

/** num_gpu_blocks × block_size from the first replica's vllm:cache_config_info labels. */
async function capacity(urls: readonly string[]): Promise<number | null> {
  const [text] = await metricsTexts(urls.slice(0, 1));
  const line = text.split('\n').find((l) => l.startsWith('vllm:cache_config_info{'));
  if (!line) return null;
  const label = (name: string) => Number(new RegExp(`[{,]${name}="([^"]+)"`).exec(line)?.[1]);
  const blocks = label('num_gpu_blocks');
  const size = label('block_size');
  return Number.isFinite(blocks) && Number.isFinite(size) ? blocks * size : null;
}

/** Tries each reset the replica may offer: the simulator's, then vLLM's (dev mode only). */
async function resetOne(url: string): Promise<boolean> {
  for (const path of ['/sim/reset', '/reset_prefix_cache']) {
    try {
      const r = await fetch(`${url}${path}`, { method: 'POST', signal: AbortSignal.timeout(10_000) });
      await r.arrayBuffer();
      if (r.ok) return true;
    } catch { /* not offered */ }
  }
  return false;
}

async function healthy(url: string): Promise<boolean> {
  try {
    const r = await fetch(`${url}/health`, { signal: AbortSignal.timeout(3000) });
    await r.arrayBuffer();
    return r.status === 200;
  } catch {
    return false;
  }
}

/** One non-streamed request of 2,000 characters of the workload's kind of text, max_tokens 1. */
async function measureTokenRatio(url: string, model: string): Promise<number> {
  const text = 'Confirm names, numbers and dates by reading them back. '.repeat(40).slice(0, 2000);
  const r = await call(`${url}/v1/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: text }], max_tokens: 1 }),
  }, 60_000);
  const usage = ((await r.json()) as { usage?: { prompt_tokens?: number } }).usage;
  if (!usage?.prompt_tokens) throw new Error(`${url}: no usage.prompt_tokens in a chat completion`);
  return usage.prompt_tokens / (text.length / 4);
}

function external(kind: 'vllm' | 'upstream', urls: string[], model: string, kvEvents: KvEndpoint[] | null = null): PeerFleet {
  return {
    kind, urls, model, kvEvents,
    tokenRatio: () => measureTokenRatio(urls[0], model),
    healthy: async () => (await Promise.all(urls.map(healthy))).every(Boolean),
    reset: async () => (await Promise.all(urls.map(resetOne))).every(Boolean),
    prefixCounters: () => counters(urls),
    queriesByReplica: () => queriesByReplica(urls),
    engineTimes: () => engineTimes(urls),
    capacityTokens: () => capacity(urls),
    stop: async () => { /* not ours */ },
  };
}

/** `kvEvents`: the replicas publish their KV events, as the real fleet's do. */
export async function simFleet(replicas: number, outputTokens: [number, number], kvBlocks?: number, kvEvents = false): Promise<PeerFleet> {
  const f = await startSimFleet(replicas, outputTokens, kvBlocks, kvEvents);
  return {
    kind: 'sim', urls: f.urls, model: MODEL, kvEvents: f.kvEvents,
    reset: async () => { await f.reset(); return true; },
    prefixCounters: () => f.prefixCounters(),
    queriesByReplica: () => queriesByReplica(f.urls),
    engineTimes: () => engineTimes(f.urls),
    capacityTokens: () => capacity(f.urls),
    tokenRatio: async () => 1,
    healthy: async () => (await Promise.all(f.urls.map(healthy))).every(Boolean),
    stop: () => f.stop(),
  };
}

interface FleetFile {
  kind: string;
  model: string;
  replicas: { name: string; url: string; pid?: number; kvEvents?: KvEndpoint | null }[];
}

/** The real fleet, if its state file exists and every replica's /health answers; else why not. */
export async function vllmFleet(file = VLLM_FLEET_FILE): Promise<PeerFleet | string> {
  if (!existsSync(file)) return `${file} does not exist: start the fleet with \`npm run fleet:vllm\` first`;
  const f = JSON.parse(readFileSync(file, 'utf8')) as FleetFile;
  const urls = f.replicas.map((r) => r.url.replace(/\/+$/, ''));
  if (urls.length === 0) return `${file} lists no replicas`;
  const down = (await Promise.all(urls.map(async (u) => ((await healthy(u)) ? null : u)))).filter((u) => u !== null);
  if (down.length) return `replica(s) not healthy: ${down.join(', ')} (from ${file})`;
  const nices = f.replicas.map((r) => (r.pid === undefined ? null : effectiveNice(r.pid)));
  const kv = f.replicas.map((r) => r.kvEvents ?? null);
  const kvEvents = kv.every((k) => k !== null) ? kv.map((k) => ({ endpoint: k!.endpoint, replayEndpoint: k!.replayEndpoint })) : null;
  return { ...external('vllm', urls, f.model, kvEvents), replicaNice: nices.every((n) => n !== null && n === nices[0]) ? nices[0] : null };
}

/** Replicas given by URL; the model is the first one the first replica lists. */
export async function upstreamFleet(urls: string[]): Promise<PeerFleet> {
  const clean = urls.map((u) => u.replace(/\/+$/, ''));
  const models = (await (await call(`${clean[0]}/v1/models`)).json()) as { data?: { id: string }[] };
  const model = models.data?.[0]?.id;
  if (!model) throw new Error(`${clean[0]}/v1/models lists no model`);
  return external('upstream', clean, model);
}
