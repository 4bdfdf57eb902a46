// What `npm run bench:scale` runs, in order, each step skipped once the run's time budget
// (--max-seconds) is spent: socket rows (the replica sweep at one pod, the pod sweep, the big
// session row, KV events off beside on), the faults, then the discrete-event rows and the
// validation of the discrete-event run against the socket row of the same size.

export interface SocketStep {
  replicas: number;
  pods: number;
  sessions: number;
  kvEvents: boolean;
  oracle?: boolean;
}

export interface DesStep {
  replicas: number;
  pods: number;
  sessions: number;
  strategy: 'affinity' | 'round-robin' | 'oracle';
}

export interface ScalePlan {
  socket: SocketStep[];
  /** Where the faults run (null: none). */
  faults: { replicas: number; pods: number; sessions: number } | null;
  des: DesStep[];
  /** The size both kinds run: the DES row of it is checked against the socket row of it. */
  validate: { replicas: number; sessions: number };
}

export interface PlanOptions {
  replicas: number[];
  pods: number[];
  /** Sessions of the sweeps (socket). */
  sessions: number;
  /** Sessions of the one big socket row (at the largest pod count, the second-largest fleet). */
  bigSessions: number;
  /** DES: sessions per replica of its sweep, and its largest run. */
  desSessionsPerReplica: number;
  desMaxSessions: number;
}

export const PLAN_DEFAULTS: PlanOptions = { replicas: [4, 16, 64, 256], pods: [1, 2, 4, 8], sessions: 200, bigSessions: 2000, desSessionsPerReplica: 8, desMaxSessions: 20_000 };

/** A plan a CI test runs in seconds: R=4, S=20, G=1 and 2, and a DES of R=16. */
export const TINY_PLAN: ScalePlan = {
  socket: [
    { replicas: 4, pods: 1, sessions: 20, kvEvents: true },
    { replicas: 4, pods: 2, sessions: 20, kvEvents: true },
    { replicas: 4, pods: 0, sessions: 20, kvEvents: true, oracle: true },
  ],
  faults: { replicas: 4, pods: 2, sessions: 20 },
  des: [
    { replicas: 4, pods: 1, sessions: 20, strategy: 'affinity' },
    { replicas: 16, pods: 1, sessions: 128, strategy: 'affinity' },
    { replicas: 16, pods: 1, sessions: 128, strategy: 'round-robin' },
  ],
  validate: { replicas: 4, sessions: 20 },
};

export function buildPlan(o: PlanOptions): ScalePlan {
  const socket: SocketStep[] = [];
  const mid = o.replicas.length > 1 ? o.replicas[o.replicas.length - 2] : o.replicas[0];
  const sweepPods = o.replicas.includes(16) ? 16 : mid;
  for (const r of o.replicas) {
    socket.push({ replicas: r, pods: 1, sessions: o.sessions, kvEvents: true });
    socket.push({ replicas: r, pods: 0, sessions: o.sessions, kvEvents: true, oracle: true });
    if (r === sweepPods) for (const g of o.pods.filter((p) => p > 1)) socket.push({ replicas: r, pods: g, sessions: o.sessions, kvEvents: true });
  }
  const largest = Math.max(...o.replicas);
  socket.push({ replicas: largest, pods: 1, sessions: o.sessions, kvEvents: false });
  if (o.bigSessions > o.sessions) socket.push({ replicas: mid, pods: Math.max(...o.pods), sessions: o.bigSessions, kvEvents: true });
  const des: DesStep[] = [];
  const desPods = [1, Math.max(...o.pods)].filter((g, i, a) => a.indexOf(g) === i);
  des.push({ replicas: sweepPods, pods: 1, sessions: o.sessions, strategy: 'affinity' });
  for (const r of o.replicas) {
    const s = r * o.desSessionsPerReplica;
    for (const g of desPods) des.push({ replicas: r, pods: g, sessions: s, strategy: 'affinity' });
    des.push({ replicas: r, pods: 1, sessions: s, strategy: 'round-robin' });
    des.push({ replicas: r, pods: 0, sessions: s, strategy: 'oracle' });
  }
  if (o.desMaxSessions > largest * o.desSessionsPerReplica) {
    for (const g of desPods) des.push({ replicas: largest, pods: g, sessions: o.desMaxSessions, strategy: 'affinity' });
    des.push({ replicas: largest, pods: 0, sessions: o.desMaxSessions, strategy: 'oracle' });
  }
  return { socket, faults: { replicas: sweepPods, pods: Math.min(4, Math.max(...o.pods)), sessions: 2 * o.sessions }, des, validate: { replicas: sweepPods, sessions: o.sessions } };
}
