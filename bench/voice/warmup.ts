// Deploy-time warmup, as the field report recommends ("keep the system prompt byte-stable and send
// one warmup request at deploy time"), before the sessions start, not counted. The sessions' first
// turns then measure routing, not the cold start of a freshly booted fleet, for every strategy alike.
//
// With room in every cache: every agent's tools + system prompt sent once to every replica,
// straight to the replica. Under pressure — the agents' prompts together do not fit one replica's
// KV cache — that would start every strategy from a cache it could never keep (each replica
// evicts most of them again). Then each agent is warmed once where its sessions will go: through
// the strategy's gateway (which places it as it will place its sessions), or, for the oracle, on
// the replicas its plan sends that agent's sessions to.

import { keepAliveAgent, streamChatExchange } from './client.js';
import { MODEL, openingHistory } from './conversation.js';
import type { SentRequest } from './ideal.js';
import type { Workload } from './workload.js';

/** Share of a replica's KV cache the agents' prompts may fill before warming all of them everywhere is pointless. */
export const PRESSURE_FILL = 0.9;

/** Tokens per KV block in the simulator (vLLM's default block size). */
const BLOCK_TOKENS = 16;

/** The agents' prompts (≈ 4 chars a token) together do not fit PRESSURE_FILL of one replica's cache. */
export function underPressure(w: Workload, kvBlocks: number): boolean {
  const tokens = w.groups.reduce((n, g) => n + g.system.length / 4 + JSON.stringify(g.tools).length / 4, 0);
  return tokens > PRESSURE_FILL * kvBlocks * BLOCK_TOKENS;
}

/** One warmup request per (url, agent group), `max_tokens` 1; what was sent, for the ideal replay. */
async function warm(pairs: readonly { url: string; group: number }[], w: Workload, timeoutMs: number, concurrent: boolean, model: string): Promise<SentRequest[]> {
  const agent = keepAliveAgent();
  const sent: SentRequest[] = [];
  const one = async ({ url, group }: { url: string; group: number }) => {
    const g = w.groups[group];
    const messages = [...openingHistory(g), { role: 'user' as const, content: 'hi' }];
    // No tools at all when the agent has none (a fleet served without tool calling), as the sessions send.
    const body = { model, messages, ...(g.tools.length ? { tools: g.tools } : {}), stream: true, stream_options: { include_usage: true }, max_tokens: 1 };
    const x = await streamChatExchange(url, {}, body, agent, timeoutMs);
    if (x.status !== 200 || x.error) throw new Error(`warmup of ${url}: ${x.error ?? `HTTP ${x.status}`}`);
    sent.push({ sentAt: x.sentAt, messages, tools: g.tools, content: x.content, toolCall: x.toolCall, finishReason: x.finishReason });
  };
  try {
    if (concurrent) {
      const byUrl = new Map<string, number[]>();
      for (const p of pairs) byUrl.set(p.url, [...(byUrl.get(p.url) ?? []), p.group]);
      await Promise.all([...byUrl].map(async ([url, groups]) => { for (const group of groups) await one({ url, group }); }));
    } else {
      for (const p of pairs) await one(p);
    }
  } finally {
    agent.destroy();
  }
  return sent;
}

/** Every agent on every replica, straight to the replicas. */
export function warmReplicas(urls: readonly string[], w: Workload, timeoutMs: number, model = MODEL): Promise<SentRequest[]> {
  return warm(urls.flatMap((url) => w.groups.map((_, group) => ({ url, group }))), w, timeoutMs, true, model);
}

/** Each agent once, through the gateway, one after the other: it places each as it will place that agent's sessions. */
export function warmThroughGateway(url: string, w: Workload, timeoutMs: number, model = MODEL): Promise<SentRequest[]> {
  return warm(w.groups.map((_, group) => ({ url, group })), w, timeoutMs, false, model);
}

/** Each replica the agents the plan (session index → replica index) sends it, straight to it. */
export function warmPlanned(urls: readonly string[], plan: readonly number[], w: Workload, timeoutMs: number, model = MODEL): Promise<SentRequest[]> {
  const pairs = new Map<string, { url: string; group: number }>();
  for (const s of w.sessions) {
    const url = urls[plan[s.index]];
    pairs.set(`${url} ${s.group}`, { url, group: s.group });
  }
  return warm([...pairs.values()], w, timeoutMs, true, model);
}
