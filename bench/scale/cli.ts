// npm run bench:scale — how the gateway's cost and quality grow with the fleet: socket rows
// (gateway processes, one redis-server, the light simulator with many replicas in one process),
// faults (a pod killed, Redis restarted), discrete-event rows in virtual time up to the largest
// fleet and session count, the discrete-event run validated against a socket row. Writes
// bench/out/scale-*.json, scale-latest.html and scale-latest.md; prints the tables.

import { parseArgs } from 'node:util';
import { PARTS, runScale, SCALE_DEFAULTS, type Part } from './bench.js';
import { markdownReport } from './markdown.js';
import { writeScaleOutputs } from './output.js';
import { buildPlan, PLAN_DEFAULTS, TINY_PLAN } from './plan.js';
import { createProgress } from '../voice/progress.js';

const P = PLAN_DEFAULTS;
const D = SCALE_DEFAULTS;
const USAGE = `usage: npm run bench:scale -- [flags]

  --replicas LIST          fleet sizes (${P.replicas.join(',')})
  --pods LIST              gateway pods sharing one redis-server (${P.pods.join(',')}); swept at R=16
  --sessions N             sessions of the socket sweeps (${P.sessions}); also the validation size
  --big-sessions N         sessions of the one big socket row (${P.bigSessions})
  --des-per-replica N      discrete-event sweep: sessions per replica (${P.desSessionsPerReplica})
  --des-max-sessions N     the largest discrete-event run, at the largest fleet (${P.desMaxSessions})
  --turns N                turns per session (${D.turns})
  --starts-per-second N    new sessions per second (${D.startsPerSecond})
  --idle-seconds N         how long the pods are measured idle before each socket row (${D.idleS})
  --kv-pad N               socket rows: each simulated replica publishes N more blocks after every stored
                           one, held by no pool, so the pods' kvEvents.maxBlocks budget fills (${D.kvPad})
  --max-seconds N          time budget of the whole run; steps past it are skipped and listed (${D.maxSeconds})
  --parts LIST             which parts run (${PARTS.join(',')})
  --tiny                   the CI-sized plan: R=4, S=20, G=1 and 2, a DES of R=16
  --seed N                 workload seed (${D.seed})
  --out DIR                output directory (bench/out)`;

function list(v: string | undefined, def: number[], name: string): number[] {
  if (v === undefined) return def;
  const xs = v.split(',').map(Number);
  if (!xs.every((x) => Number.isInteger(x) && x >= 1)) throw new Error(`--${name} wants positive integers, comma-separated, got ${v}`);
  return xs;
}

function num(v: string | undefined, def: number, name: string, min = 1): number {
  if (v === undefined) return def;
  const n = Number(v);
  if (!Number.isFinite(n) || n < min) throw new Error(`--${name} wants a number ≥ ${min}, got ${v}`);
  return n;
}

async function main(): Promise<void> {
  const s = { type: 'string' } as const;
  const { values: a } = parseArgs({
    options: { replicas: s, pods: s, sessions: s, 'big-sessions': s, 'des-per-replica': s, 'des-max-sessions': s, turns: s, 'starts-per-second': s, 'max-seconds': s, 'idle-seconds': s, 'kv-pad': s, seed: s, out: s, parts: s, tiny: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
    strict: true,
  });
  if (a.help) {
    console.log(USAGE);
    return;
  }
  const plan = a.tiny ? TINY_PLAN : buildPlan({
    replicas: list(a.replicas, P.replicas, 'replicas'),
    pods: list(a.pods, P.pods, 'pods'),
    sessions: num(a.sessions, P.sessions, 'sessions'),
    bigSessions: num(a['big-sessions'], P.bigSessions, 'big-sessions'),
    desSessionsPerReplica: num(a['des-per-replica'], P.desSessionsPerReplica, 'des-per-replica'),
    desMaxSessions: num(a['des-max-sessions'], P.desMaxSessions, 'des-max-sessions'),
  });
  const parts = (a.parts ?? PARTS.join(',')).split(',').map((x) => x.trim()) as Part[];
  for (const p of parts) if (!(PARTS as readonly string[]).includes(p)) throw new Error(`--parts: ${p} is not one of ${PARTS.join(', ')}`);
  const progress = createProgress();
  const result = await runScale({
    ...D, plan, parts,
    turns: num(a.turns, D.turns, 'turns'),
    startsPerSecond: num(a['starts-per-second'], D.startsPerSecond, 'starts-per-second'),
    maxSeconds: num(a['max-seconds'], D.maxSeconds, 'max-seconds', 10),
    idleS: num(a['idle-seconds'], D.idleS, 'idle-seconds'),
    kvPad: num(a['kv-pad'], D.kvPad, 'kv-pad', 0),
    seed: num(a.seed, D.seed, 'seed', 0),
  }, progress);
  progress.done();
  const paths = writeScaleOutputs(result, a.out ?? 'bench/out');
  process.stdout.write(`${markdownReport(result)}\nwrote ${paths.json}, ${paths.md}\nreport: ${paths.html}\n`);
}

main().catch((e: unknown) => {
  process.stderr.write(`\nbench:scale: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exitCode = 1;
});
