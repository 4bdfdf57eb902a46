// Many replicas in one process: one node:http server each, ports consecutive from basePort or free.

import type { SimReplicaOptions } from './config.js';
import { startReplica, type SimReplica } from './replica.js';

export interface FleetOptions extends SimReplicaOptions {
  replicas: number;
  /** 0 or omitted = free ports. */
  basePort?: number;
}

export interface SimFleet {
  replicas: SimReplica[];
  urls: string[];
  close(): Promise<void>;
}

export async function startFleet(opts: FleetOptions): Promise<SimFleet> {
  const { replicas: count, basePort, ...rest } = opts;
  if (!Number.isInteger(count) || count < 1) throw new Error('replicas must be a positive integer');
  const replicas: SimReplica[] = [];
  const close = async () => {
    await Promise.all(replicas.map((r) => r.close()));
  };
  try {
    for (let i = 0; i < count; i++) {
      const port = basePort ? basePort + i : 0;
      const name = rest.name ? `${rest.name}-${i}` : undefined;
      replicas.push(await startReplica({ ...rest, port, name }, i));
    }
  } catch (e) {
    await close();
    throw e;
  }
  return { replicas, urls: replicas.map((r) => r.url), close };
}
