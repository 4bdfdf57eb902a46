// Many replicas in one process: one node:http server each, ports consecutive from basePort or free.

import type { SimReplicaOptions } from './config.js';
import { startReplica, type SimReplica } from './replica.js';

export interface FleetOptions extends SimReplicaOptions {
  replicas: number;
  /** 0 or omitted = free ports. */
  basePort?: number;
  /** With kvEvents: replica i publishes on this + 2i and replays on this + 2i + 1 (0 = free ports). */
  kvEventsBasePort?: number;
}

export interface SimFleet {
  replicas: SimReplica[];
  urls: string[];
  close(): Promise<void>;
}

export async function startFleet(opts: FleetOptions): Promise<SimFleet> {
  const { replicas: count, basePort, kvEventsBasePort, ...rest } = opts;
  if (!Number.isInteger(count) || count < 1) throw new Error('replicas must be a positive integer');
  const replicas: SimReplica[] = [];
  const close = async () => {
    await Promise.all(replicas.map((r) => r.close()));
  };
  try {
    for (let i = 0; i < count; i++) {
      const port = basePort ? basePort + i : 0;
      const name = rest.name ? `${rest.name}-${i}` : undefined;
      const base = rest.kvEvents === true ? {} : rest.kvEvents;
      const kvEvents = base && kvEventsBasePort ? { ...base, port: kvEventsBasePort + 2 * i, replayPort: kvEventsBasePort + 2 * i + 1 } : rest.kvEvents;
      replicas.push(await startReplica({ ...rest, port, name, kvEvents }, i));
    }
  } catch (e) {
    await close();
    throw e;
  }
  return { replicas, urls: replicas.map((r) => r.url), close };
}
