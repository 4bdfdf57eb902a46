// The shared-fleet runs on real vLLM (CPU) replicas (`bench:voice --preset shared --fleet vllm`):
// replicas of the fleet's tiny model (bench/real/) started here at --scheduling-policy priority,
// and stopped at the end. A fleet already running (`npm run fleet:vllm`) is left alone: this run
// refuses to start rather than take its place, since its replicas run vLLM's default policy.

import { REPLICA_NICE, prepare, readState } from '../real/fleet-vllm.js';
import { healthy, SERVED_MODEL, startReplicaProcess, stopReplicaProcess, waitHealthy, type ReplicaState } from '../real/vllm-replica.js';
import { freePort, setGroupNice } from '../lib/procs.js';

export interface PriorityFleet {
  urls: string[];
  model: string;
  /** Between runs: vLLM's prefix cache emptied (POST /reset_prefix_cache, a dev-mode endpoint). */
  reset(): Promise<void>;
  stop(): Promise<void>;
}

export async function startPriorityFleet(count: number, longPrefill: number): Promise<PriorityFleet> {
  const running = readState();
  if (running !== null && (await Promise.all(running.replicas.map((r) => healthy(r.url)))).some(Boolean)) {
    throw new Error('a vLLM fleet is running (npm run fleet:vllm): stop it first (npm run fleet:vllm -- --stop); this run starts its own at --scheduling-policy priority');
  }
  prepare();
  const extraArgs = ['--scheduling-policy', 'priority', ...(longPrefill > 0 ? ['--long-prefill-token-threshold', String(longPrefill)] : [])];
  const replicas: ReplicaState[] = [];
  const stop = async () => { for (let i = 0; i < count; i++) await stopReplicaProcess(i); };
  try {
    for (let i = 0; i < count; i++) {
      replicas.push(startReplicaProcess({ index: i, port: await freePort(), kvEvents: { pub: await freePort(), replay: await freePort() } }, { extraArgs, extraEnv: { VLLM_SERVER_DEV_MODE: '1' } }));
    }
    for (const r of replicas) setGroupNice(r.pid, REPLICA_NICE);
    await Promise.all(replicas.map((r) => waitHealthy(r)));
  } catch (e) {
    await stop();
    throw e;
  }
  const urls = replicas.map((r) => r.url);
  return {
    urls,
    model: SERVED_MODEL,
    async reset() {
      await Promise.all(urls.map(async (u) => {
        const res = await fetch(`${u}/reset_prefix_cache`, { method: 'POST' });
        await res.arrayBuffer();
        if (!res.ok) throw new Error(`${u}/reset_prefix_cache: HTTP ${res.status}`);
      }));
    },
    stop,
  };
}
