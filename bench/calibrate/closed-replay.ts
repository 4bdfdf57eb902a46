// A recorded trace sent again, at its own times, through a router in front of a simulated fleet of
// the real fleet's capacities (block size, blocks, batch limits, the CPU timing): here the router
// decides afresh, from what the simulated replicas answer and publish, so the hit rate it gets is
// the simulator's prediction for that router on that workload. Prompts go as their recorded
// token ids (`/v1/completions` with a list of ids, which vLLM and the simulator both take), so
// every prompt is exactly the one the real replicas saw; a session's requests carry its group as
// x-session-id. Answers are the simulator's own tokens: a next turn's prompt (recorded) repeats
// the real answer, so it can hit one block less here than on vLLM, never more.

import { Agent } from 'node:http';
import { startFleet } from '../sim/index.js';
import type { TimingKnobs } from '../sim/config.js';
import { traceReplicaOptions } from './engine-replay.js';
import type { KvModel } from '../sim/kv-cache.js';
import { startGateway } from '../voice/fleet.js';
import { streamExchange, readChatEvent } from '../voice/client.js';
import { hitRate, type Trace } from './trace.js';

export interface ClosedReplayOptions {
  strategy: string;
  timing: Readonly<TimingKnobs>;
  kvModel: KvModel;
  /** Feed the gateway the simulated replicas' KV events (warmroute's production setting). */
  kvEvents: boolean;
}

export interface ClosedReplayResult {
  hitRate: number;
  /** Per request of the trace: cached tokens served here (null: failed). */
  cached: (number | null)[];
  routes: Record<string, number>;
  failed: number;
}
// A chat trace is sent as completions of its recorded token ids here (the simulator's own chat
// template would tokenize the messages otherwise than vLLM did): the router then sees no system
// prompt to group by. des-replay.ts sends the recorded messages instead.

const MODEL = 'replay-model';

export async function closedReplay(trace: Trace, o: ClosedReplayOptions): Promise<ClosedReplayResult> {
  const { name: _name, ...replica } = traceReplicaOptions(trace, { timing: o.timing, kvModel: o.kvModel, name: 'replay', model: MODEL });
  const fleet = await startFleet({ replicas: trace.replicas.length, ...replica, kvEvents: o.kvEvents });
  const kv = o.kvEvents ? fleet.replicas.map((r) => ({ endpoint: r.kvEvents!.endpoint, replayEndpoint: r.kvEvents!.replayEndpoint })) : null;
  const gateway = await startGateway(fleet.urls, o.strategy, [], kv);
  const agent = new Agent({ keepAlive: true, maxSockets: 256 });
  const cached: (number | null)[] = trace.requests.map(() => null);
  const routes: Record<string, number> = {};
  let failed = 0;
  try {
    const t0 = performance.now();
    await Promise.all(trace.requests.map(async (r, i) => {
      if (r.cachedTokens === null) return;
      await new Promise((res) => setTimeout(res, Math.max(0, t0 + r.atMs - performance.now())));
      const headers: Record<string, string> = r.sessionKey !== undefined ? { 'x-session-id': r.sessionKey } : r.group.startsWith('s') ? { 'x-session-id': `replay-${r.group}` } : {};
      const body = { model: MODEL, prompt: r.promptIds, max_tokens: Math.max(1, r.outputIds.length), ignore_eos: true, stream: true, stream_options: { include_usage: true } };
      // Chat's chunk reader takes the usage chunk of a completions stream alike (`usage` at the top).
      const x = await streamExchange(gateway.url, '/v1/completions', headers, body, agent, 120_000, readChatEvent);
      if (x.error !== null || x.status !== 200) failed++;
      else cached[i] = x.cachedTokens;
      if (x.route) routes[x.route] = (routes[x.route] ?? 0) + 1;
    }));
  } finally {
    agent.destroy();
    await gateway.stop();
    await fleet.close();
  }
  const served = trace.requests.map((r, i) => ({ promptIds: r.promptIds, cachedTokens: cached[i] }));
  return { hitRate: hitRate(served), cached, routes, failed };
}
