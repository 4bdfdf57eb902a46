// What a router adds to a request, measured the same way for every one of them: a tiny streamed
// chat (a few prompt tokens, one answer token) sent in turn straight to a replica and through the
// router, on an idle fleet, one at a time. The added latency is the difference of the two TTFT
// medians; alternating the two paths cancels any drift of the fleet between them.

import { keepAliveAgent, streamChatExchange } from '../voice/client.js';
import { percentiles } from '../lib/percentiles.js';

export interface AddedLatency {
  /** Pairs measured. */
  n: number;
  directP50Ms: number;
  viaP50Ms: number;
  /** viaP50Ms − directP50Ms. */
  addedP50Ms: number;
  failed: number;
}

/** The figures from the two sets of TTFTs (pooled over rounds, or one probe's). */
export function addedFrom(direct: readonly number[], via: readonly number[], failed: number): AddedLatency {
  const d = percentiles(direct).p50;
  const v = percentiles(via).p50;
  return { n: Math.min(direct.length, via.length), directP50Ms: d, viaP50Ms: v, addedP50Ms: v - d, failed };
}

export async function probeAddedLatency(router: { url: string; headers: Record<string, string> }, replicas: readonly string[], model: string, n = 20): Promise<{ direct: number[]; via: number[]; failed: number }> {
  const agent = keepAliveAgent();
  const direct: number[] = [];
  const via: number[] = [];
  let failed = 0;
  const body = { model, messages: [{ role: 'user', content: 'ping' }], stream: true, max_tokens: 1 };
  const one = async (url: string, headers: Record<string, string>, into: number[]) => {
    const x = await streamChatExchange(url, headers, body, agent, 30_000);
    if (x.status !== 200 || x.error) failed++;
    else into.push(x.ttftMs ?? x.totalMs);
  };
  try {
    // One of each first, unmeasured: connections open, the prompt cached on every replica.
    for (const r of replicas) await one(r, {}, []);
    await one(router.url, router.headers, []);
    for (let i = 0; i < n; i++) {
      await one(replicas[i % replicas.length], {}, direct);
      await one(router.url, router.headers, via);
    }
  } finally {
    agent.destroy();
  }
  return { direct, via, failed };
}
