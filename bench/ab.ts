/**
 * npm run bench:ab -- --b PATH/TO/OTHER/dist/cli.js [--a dist/cli.js] [--blocks 40] [--rounds 6]
 * Two gateway builds, A and B, against the same simple upstream in one run, with direct as the
 * reference: concurrency 1 steady (rotated blocks of 50 requests) and concurrency 50 (rotated
 * rounds of 1,000), client TTFT percentiles and each gateway's CPU per request. For "did this
 * change make the hot path faster?": build the other revision in a git worktree and point --b at it.
 */
import { parseArgs } from 'node:util';
import { fmt, percentiles } from './lib/percentiles.js';
import { benchBody, closePools, loaded, rotatedRounds, steadyBlocks, warm } from './overhead/load.js';
import { startUpstream, startWarmroute, type Target } from './overhead/targets.js';

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
  targets.push(await startWarmroute(upstream.url, ['--log-level', 'info'], entry, `${name} ${entry}`));
}
const body = benchBody(8);
const loads = targets.map(loaded);
try {
  await warm(loads, body);
  const c1 = await steadyBlocks(loads, body, Number(args.blocks) * BLOCK, BLOCK);
  const rounds = Number(args.rounds);
  const { ttft: c50, cpuPerReq } = await rotatedRounds(loads, body, PER_ROUND * rounds, rounds);
  const d1 = percentiles(c1.get(upstream.name)!);
  const d50 = percentiles(c50.get(upstream.name)!);
  process.stdout.write('| target | c=1 TTFT p50 ms | p90 | added p50 | c=50 p50 ms | p99 | added p99 | CPU µs/request (c=50) |\n|---|---:|---:|---:|---:|---:|---:|---:|\n');
  for (const t of targets) {
    const a = percentiles(c1.get(t.name)!);
    const b = percentiles(c50.get(t.name)!);
    const ref = t === upstream;
    process.stdout.write(`| ${t.name} | ${fmt(a.p50, 3)} | ${fmt(a.p90, 3)} | ${ref ? '—' : fmt(a.p50 - d1.p50, 3)} | ${fmt(b.p50, 2)} | ${fmt(b.p99, 2)} | ${ref ? '—' : fmt(b.p99 - d50.p99, 2)} | ${fmt((cpuPerReq.get(t.name) ?? NaN) * 1e6, 0)} |\n`);
  }
} finally {
  await closePools(loads);
  for (const t of targets.reverse()) await t.child?.stop();
}
