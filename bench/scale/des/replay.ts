// The routers' own CPU per request, measured apart from the simulator: a DES run records every
// call it made to its routers (identify + route before a request, served after it, each with the
// virtual time and the replicas' load figures the pod saw), then the calls are made again, in the
// same order, to fresh routers in a process doing nothing else. Timed in the DES itself, a
// decision's CPU also carries the simulator's garbage collection and the process's other threads
// (whose share grows with the fleet's heap); replayed, it carries only the routers' own.

import { DEFAULT_IDENTITY_OPTIONS, identify, type RequestIdentity } from '../../../src/identify/identity.js';
import type { ReplicaView, Router, ServedOutcome } from '../../../src/routing/types.js';

/** The figures of a replica view a decision reads that change during a run. */
const FIELDS = 5;

export interface ReplayLog {
  /** One entry per call, in call order. */
  readonly calls: ReplayCall[];
}

export type ReplayCall =
  | { kind: 'route'; pod: number; at: number; body: unknown; headers: Record<string, string>; load: Float64Array }
  | { kind: 'served'; pod: number; at: number; route: number; outcome: ServedOutcome };

type MutableView = { -readonly [K in keyof ReplicaView]: ReplicaView[K] };

export function loadOf(views: readonly ReplicaView[]): Float64Array {
  const a = new Float64Array(views.length * FIELDS);
  views.forEach((v, i) => {
    a[i * FIELDS] = v.inflight;
    a[i * FIELDS + 1] = v.waiting;
    a[i * FIELDS + 2] = v.running;
    a[i * FIELDS + 3] = v.kvUsage;
    a[i * FIELDS + 4] = v.peerInflight ?? 0;
  });
  return a;
}

// A replay is made at least this many times, and until this many requests have been replayed, so
// that a short log is not mostly the code's compilation.
const MIN_REPEATS = 3;
const MIN_REQUESTS = 30_000;

/**
 * Makes the log's calls again on fresh routers (`make(pod, now)`), several times, and returns the
 * least CPU ms per request of the repeats (the first pays for compiling the code).
 */
export function replayCpuMsPerRequest(log: ReplayLog, views: () => MutableView[][], make: (pod: number, now: () => number) => Router): number {
  const requests = log.calls.filter((c) => c.kind === 'route').length;
  const repeat = Math.max(MIN_REPEATS, Math.ceil(MIN_REQUESTS / Math.max(1, requests)));
  let best = Number.POSITIVE_INFINITY;
  for (let k = 0; k < repeat; k++) {
    const podViews = views();
    let t = 0;
    const routers = podViews.map((_, g) => make(g, () => t));
    const identities: RequestIdentity[] = [];
    const c0 = process.cpuUsage();
    for (const c of log.calls) {
      t = c.at;
      if (c.kind === 'route') {
        const vs = podViews[c.pod];
        const a = c.load;
        for (let i = 0; i < vs.length; i++) {
          vs[i].inflight = a[i * FIELDS];
          vs[i].waiting = a[i * FIELDS + 1];
          vs[i].running = a[i * FIELDS + 2];
          vs[i].kvUsage = a[i * FIELDS + 3];
          vs[i].peerInflight = a[i * FIELDS + 4];
        }
        const identity = identify('chat', c.body as Record<string, unknown>, c.headers, DEFAULT_IDENTITY_OPTIONS);
        identities.push(identity);
        routers[c.pod].route({ identity, replicas: vs });
      } else {
        routers[c.pod].served(identities[c.route], c.outcome);
      }
    }
    const d = process.cpuUsage(c0);
    best = Math.min(best, (d.user + d.system) / 1000 / Math.max(1, requests));
  }
  return best;
}
