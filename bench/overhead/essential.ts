/**
 * tsx bench/overhead/essential.ts [--requests 20000] — the work no routing gateway can skip, each
 * part alone in one process, per request: the overhead bench's 8 KiB chat body checked as UTF-8,
 * decoded and parsed once (JSON.parse), its identity and prefix chain (xxhash over the canonical
 * prompt), and one routing decision with its feedback (the affinity strategy over one replica, the
 * session pinned). Read against the floor's whole CPU per request in bench:overhead: what these
 * cost is the least a gateway that routes by the prompt adds to a bare proxy.
 */
import { isUtf8 } from 'node:buffer';
import { parseArgs } from 'node:util';
import { DEFAULT_IDENTITY_OPTIONS, identify, type RequestIdentity } from '../../src/identify/identity.js';
import { createRouter } from '../../src/routing/router.js';
import type { ReplicaView } from '../../src/routing/types.js';
import { createMemorySessionStore } from '../../src/store/memory.js';
import { benchBody } from './load.js';

const { values } = parseArgs({ options: { requests: { type: 'string', default: '20000' } } });
const N = Number(values.requests);
const bytes = Buffer.from(benchBody(8).body);
const SESSIONS = 50;
const headers = Array.from({ length: SESSIONS }, (_, i) => ({ 'x-session-id': `s-${i}` }));
const replicas: ReplicaView[] = [{ name: 'r0', weight: 1, up: true, draining: false, inflight: 0, models: null, waiting: 0, running: 0, kvUsage: 0, kvCapacityTokens: null }];
const router = createRouter('affinity', { store: createMemorySessionStore({ maxSessions: 100_000, ttlMs: 3_600_000 }) });

/** CPU µs per call of `f` over N calls, after as many to warm up. */
function cost(f: (i: number) => void): number {
  for (let i = 0; i < N; i++) f(i);
  const t0 = process.cpuUsage();
  for (let i = 0; i < N; i++) f(i);
  const t = process.cpuUsage(t0);
  return (t.user + t.system) / N;
}

let sink: unknown;
const parse = cost(() => { if (!isUtf8(bytes)) throw new Error('not UTF-8'); sink = JSON.parse(bytes.toString('utf8')); });
const body = JSON.parse(bytes.toString('utf8')) as Record<string, unknown>;
const ids: RequestIdentity[] = headers.map((h) => identify('chat', body, h, DEFAULT_IDENTITY_OPTIONS));
const ident = cost((i) => { sink = identify('chat', body, headers[i % SESSIONS], DEFAULT_IDENTITY_OPTIONS); });
const route = cost((i) => {
  const id = ids[i % SESSIONS];
  const d = router.route({ identity: id, replicas });
  router.served(id, { replica: d.ranked[0].name, result: 'ok', replicaTtftMs: 30, promptTokens: 2000, cachedTokens: 1984 });
});
void sink;
const total = parse + ident + route;
process.stdout.write([
  `The essential work per request, each part alone (${N} calls, CPU µs per call):`,
  '',
  '| part | µs / request |',
  '|---|---:|',
  `| UTF-8 check, decode and JSON.parse of the 8 KiB body | ${parse.toFixed(1)} |`,
  `| identify: session key, canonical prompt, prefix chain (xxhash) | ${ident.toFixed(1)} |`,
  `| route: one affinity decision and its feedback | ${route.toFixed(1)} |`,
  `| **total** | **${total.toFixed(1)}** |`,
  '',
].join('\n'));
