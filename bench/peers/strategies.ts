// The routers bench:peers compares, in the order they run: what each is, how it is started, and
// which header (if any) carries the session key to it. Every keyed session sends its key in the
// header the router documents for stickiness, as its users would be told to; warmroute gets the
// workload as it is (x-session-id, body prompt_cache_key, or no key).

import { startGateway, gatewayMetrics, gatewayTimes, type GatewayMetrics, type GatewayTimes } from '../voice/fleet.js';
import { startLitellm, startNginx, startSglang, startVllmRouter, type Router } from './routers.js';

export interface RunningRouter extends Router {
  /** warmroute's own figures (its overhead histogram, route reasons); null for a peer. */
  metrics(): Promise<GatewayMetrics | null>;
  /** warmroute's hop and TTFT histogram totals so far; null for a peer. */
  times(): Promise<GatewayTimes | null>;
}

export interface PeerStrategy {
  name: string;
  label: string;
  /** Header the router reads a session key from; null: it reads none (or warmroute's own). */
  sessionHeader: string | null;
  /** Every session sent without a key: routing on the prompt alone. */
  keyless?: boolean;
  start(workers: readonly string[], model: string): Promise<RunningRouter>;
}

const peer = (r: Router): RunningRouter => ({ ...r, metrics: async () => null, times: async () => null });

async function warmroute(workers: readonly string[], strategy: string): Promise<RunningRouter> {
  const g = await startGateway([...workers], strategy);
  return { url: g.url, headers: {}, died: g.died, stop: g.stop, pid: g.pid, metrics: () => gatewayMetrics(g.adminUrl), times: () => gatewayTimes(g.adminUrl) };
}

export const PEER_STRATEGIES: readonly PeerStrategy[] = [
  { name: 'round-robin', label: 'round-robin (warmroute --strategy round-robin)', sessionHeader: null, start: (w) => warmroute(w, 'round-robin') },
  { name: 'nginx-hash', label: 'nginx `hash $http_x_session_id consistent`', sessionHeader: 'x-session-id', start: async (w) => peer(await startNginx(w, 'x-session-id')) },
  { name: 'litellm', label: 'LiteLLM proxy (session_affinity)', sessionHeader: 'x-litellm-session-id', start: async (w, m) => peer(await startLitellm(w, m)) },
  { name: 'sglang-cache-aware', label: 'SGLang router `cache_aware`', sessionHeader: null, start: async (w) => peer(await startSglang(w, 'cache_aware')) },
  { name: 'sglang-sticky', label: 'SGLang router `manual` (X-SMG-Routing-Key)', sessionHeader: 'x-smg-routing-key', start: async (w) => peer(await startSglang(w, 'manual')) },
  { name: 'vllm-router-cache-aware', label: 'vLLM router `cache_aware`', sessionHeader: null, start: async (w) => peer(await startVllmRouter(w, 'cache_aware')) },
  { name: 'vllm-router-consistent-hash', label: 'vLLM router `consistent_hash` (X-Session-ID)', sessionHeader: 'x-session-id', start: async (w) => peer(await startVllmRouter(w, 'consistent_hash')) },
  { name: 'warmroute', label: '**warmroute** (affinity)', sessionHeader: null, start: (w) => warmroute(w, 'affinity') },
  { name: 'warmroute-keyless', label: '**warmroute** (affinity, every session keyless)', sessionHeader: null, keyless: true, start: (w) => warmroute(w, 'affinity') },
];

export function strategyNamed(name: string): PeerStrategy {
  const s = PEER_STRATEGIES.find((x) => x.name === name);
  if (!s) throw new Error(`unknown peer ${name}; one of ${PEER_STRATEGIES.map((x) => x.name).join(', ')}`);
  return s;
}
