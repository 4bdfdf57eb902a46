// What a socket run reads around itself: each gateway process's CPU and memory from /proc, a
// gateway's own KV-event counters from its /metrics, and Redis's command counts and memory from
// INFO. All of it is read before and after a window, and the deltas are the figures.

import { readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';
import { call } from '../lib/http.js';
import { groupCpuSeconds } from '../lib/procs.js';
import { sumSamples } from '../lib/prom.js';

/** CPU seconds of each pid (with its process group), summed; pids that cannot be read count 0. */
export function cpuSecondsOfAll(pids: readonly number[]): number {
  return pids.reduce((s, p) => s + (groupCpuSeconds(p) ?? 0), 0);
}

/** Resident and peak resident memory of a process, MB, from /proc/<pid>/status; null off Linux. */
export function memoryOf(pid: number): { rssMb: number; peakMb: number } | null {
  try {
    const s = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(s)?.[1] ?? NaN);
    return { rssMb: kb('VmRSS') / 1024, peakMb: kb('VmHWM') / 1024 };
  } catch {
    return null;
  }
}

export interface RedisInfo {
  /** Commands executed so far, INFO itself left out. */
  commands: number;
  usedMemoryBytes: number;
}

export async function redisInfo(client: Redis): Promise<RedisInfo> {
  const stats = await client.info('commandstats');
  let commands = 0;
  for (const m of stats.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) if (m[1] !== 'info') commands += Number(m[2]);
  const memory = await client.info('memory');
  return { commands, usedMemoryBytes: Number(/^used_memory:(\d+)/m.exec(memory)?.[1] ?? NaN) };
}

export interface KvEventCounts {
  events: number;
  /** Engine blocks the gateway tracks from the replicas' events, summed over replicas. */
  blocks: number;
}

export async function kvEventCounts(adminUrl: string): Promise<KvEventCounts> {
  const text = await (await call(`${adminUrl}/metrics`)).text();
  return { events: sumSamples(text, 'warmroute_kv_events_total'), blocks: sumSamples(text, 'warmroute_kv_event_blocks') };
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
