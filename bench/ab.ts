/**
 * npm run bench:ab -- --b PATH/TO/OTHER/dist/cli.js [--a dist/cli.js] [--blocks 40] [--rounds 6]
 * Two gateway builds, A and B, against the same simple upstream in one run, with direct as the
 * reference: concurrency 1 steady (rotated blocks of 50 requests) and concurrency 50 (rotated
 * rounds of 1,000), client TTFT percentiles and each gateway's CPU per request. For "did this
 * change make the hot path faster?": build the other revision in a git worktree and point --b at it.
 */
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { cpuSecondsOf } from './lib/cpu.js';
import { fmt, percentiles } from './lib/percentiles.js';
import { freePort, startChild } from './lib/procs.js';
import { benchBody, closedLoop, ttftOnce } from './overhead/load.js';
import { startUpstream, waitForPort, type Target } from './overhead/targets.js';

const { values: args } = parseArgs({
  options: {
    a: { type: 'string', default: 'dist/cli.js' },
    b: { type: 'string' },
    blocks: { type: 'string', default: '40' },
    rounds: { type: 'string', default: '6' },
  },
});
if (!args.b) {
  process.stderr.write('usage: npm run bench:ab -- --b PATH/TO/OTHER/dist/cli.js [--a dist/cli.js]\n');
  process.exit(2);
}
const BLOCK = 50;
const PER_ROUND = 1_000;

const upstream = await startUpstream();
const targets: Target[] = [upstream];
for (const [name, entry] of [['A', args.a], ['B', args.b]] as const) {
  const [port, admin] = [await freePort(), await freePort()];
  const child = await startChild(process.execPath, [entry, 'serve', '--upstream', upstream.url, '--host', '127.0.0.1', '--port', String(port), '--admin-host', '127.0.0.1', '--admin-port', String(admin), '--log-level', 'info'], null);
  await waitForPort(admin, 20_000);
  targets.push({ name: `${name} ${entry}`, url: `http://127.0.0.1:${port}`, child });
}
const body = benchBody(8);
const p1 = targets.map((t) => new Pool(t.url, { connections: 1 }));
const p50 = targets.map((t) => new Pool(t.url, { connections: 50 }));
const c1 = targets.map(() => [] as number[]);
const c50 = targets.map(() => [] as number[]);
const cpu = targets.map(() => 0);
try {
  for (let k = 0; k < targets.length; k++) {
    for (let i = 0; i < 300; i++) await ttftOnce(p1[k], body, 'warm');
    await closedLoop(p50[k], body, 50, PER_ROUND, 'warm');
  }
  for (let b = 0; b < Number(args.blocks); b++) {
    for (let j = 0; j < targets.length; j++) {
      const k = (b + j) % targets.length;
      for (let i = 0; i < BLOCK; i++) c1[k].push(await ttftOnce(p1[k], body, `s${i % 7}`));
    }
  }
  const rounds = Number(args.rounds);
  for (let r = 0; r < rounds; r++) {
    for (let j = 0; j < targets.length; j++) {
      const k = (r + j) % targets.length;
      const pid = targets[k].child!.proc.pid!;
      const before = cpuSecondsOf(pid);
      c50[k].push(...(await closedLoop(p50[k], body, 50, PER_ROUND, `r${r}`)));
      cpu[k] += (cpuSecondsOf(pid) - before) / (PER_ROUND * rounds);
    }
  }
  const d1 = percentiles(c1[0]);
  const d50 = percentiles(c50[0]);
  process.stdout.write('| target | c=1 TTFT p50 ms | p90 | added p50 | c=50 p50 ms | p99 | added p99 | CPU µs/request (c=50) |\n|---|---:|---:|---:|---:|---:|---:|---:|\n');
  for (let k = 0; k < targets.length; k++) {
    const a = percentiles(c1[k]);
    const b = percentiles(c50[k]);
    process.stdout.write(`| ${targets[k].name} | ${fmt(a.p50, 3)} | ${fmt(a.p90, 3)} | ${k ? fmt(a.p50 - d1.p50, 3) : '—'} | ${fmt(b.p50, 2)} | ${fmt(b.p99, 2)} | ${k ? fmt(b.p99 - d50.p99, 2) : '—'} | ${fmt(cpu[k] * 1e6, 0)} |\n`);
  }
} finally {
  for (const p of [...p1, ...p50]) await p.close();
  for (const t of targets.reverse()) await t.child?.stop();
}
