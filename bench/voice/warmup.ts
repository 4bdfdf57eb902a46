// Deploy-time warmup, as the field report recommends ("keep the system prompt byte-stable and send
// one warmup request at deploy time"): every agent's tools + system prompt sent once to every
// replica, straight to the replica, before the sessions start. The sessions' first turns then
// measure routing, not the cold start of a freshly booted fleet, for every strategy alike.

import { keepAliveAgent, streamChatExchange } from './client.js';
import { MODEL, openingHistory } from './conversation.js';
import type { SentRequest } from './ideal.js';
import type { Workload } from './workload.js';

/** Returns what was sent, for the ideal replay (warm before the first turn, not counted). */
export async function warmReplicas(urls: readonly string[], w: Workload, timeoutMs: number, model = MODEL): Promise<SentRequest[]> {
  const agent = keepAliveAgent();
  const sent: SentRequest[] = [];
  try {
    await Promise.all(urls.map(async (url) => {
      for (const g of w.groups) {
        const messages = [...openingHistory(g), { role: 'user' as const, content: 'hi' }];
        // No tools at all when the agent has none (a fleet served without tool calling), as the sessions send.
        const body = { model, messages, ...(g.tools.length ? { tools: g.tools } : {}), stream: true, stream_options: { include_usage: true }, max_tokens: 1 };
        const x = await streamChatExchange(url, {}, body, agent, timeoutMs);
        if (x.status !== 200 || x.error) throw new Error(`warmup of ${url}: ${x.error ?? `HTTP ${x.status}`}`);
        sent.push({ sentAt: x.sentAt, messages, tools: g.tools, content: x.content, toolCall: x.toolCall, finishReason: x.finishReason });
      }
    }));
  } finally {
    agent.destroy();
  }
  return sent;
}
