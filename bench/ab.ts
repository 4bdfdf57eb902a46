/**
 * npm run bench:ab -- --b PATH/TO/OTHER/dist/cli.js [--a dist/cli.js] [--blocks 40] [--rounds 6]
 *                     [--route chat|completions] [--body-kb 8] [--chunk-gap-ms 0]
 * Two gateway builds, A and B, against the same simple upstream in one run, with direct as the
 * reference: concurrency 1 steady (rotated blocks of 50 requests) and concurrency 50 (rotated
 * rounds of 1,000), client TTFT percentiles and each gateway's CPU per request. For "does this
 * hand-written part earn its place?": build the other variant in a git worktree and point --b at
 * it; the verdict line applies the project's rule (≥ 0.05 ms added TTFT p50 at concurrency 1, or
 * ≥ 10% CPU per request at concurrency 50).
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
    route: { type: 'string', default: 'chat' },
    'body-kb': { type: 'string', default: '8' },
    // The upstream's chunks after the first this many ms apart (bench/overhead/upstream.ts); 0: one per tick.
    'chunk-gap-ms': { type: 'string', default: '0' },
  },
});
if (!args.b) {
  process.stderr.write('usage: npm run bench:ab -- --b PATH/TO/OTHER/dist/cli.js [--a dist/cli.js]\n');
  process.exit(2);
}
const ROUTES = ['chat', 'completions'] as const;
const route = ROUTES.find((r) => r === args.route);
if (route === undefined) {
  process.stderr.write(`--route wants ${ROUTES.join(' or ')}, got ${JSON.stringify(args.route)}\n`);
  process.exit(2);
}
const BLOCK = 50;
const PER_ROUND = 1_000;

const upstream = await startUpstream({ chunkGapMs: Number(args['chunk-gap-ms']) });
const targets: Target[] = [upstream];
for (const [name, entry] of [['A', args.a], ['B', args.b]] as const) {
  targets.push(await startWarmroute(upstream.url, ['--log-level', 'info'], entry, `${name} ${entry}`));
}
const body = benchBody(Number(args['body-kb']), route);
const loads = targets.map(loaded);
try {
  await warm(loads, body);
  const c1 = await steadyBlocks(loads, body, Number(args.blocks) * BLOCK, BLOCK);
  const rounds = Number(args.rounds);
  const { ttft: c50, cpuPerReq } = await rotatedRounds(loads, body, PER_ROUND * rounds, rounds);
  const d1 = percentiles(c1.get(upstream.name)!);
  const d50 = percentiles(c50.get(upstream.name)!);
  process.stdout.write(`${route} requests of ${args['body-kb']} KiB\n\n| target | c=1 TTFT p50 ms | p90 | added p50 | c=50 p50 ms | p99 | added p99 | CPU µs/request (c=50) |\n|---|---:|---:|---:|---:|---:|---:|---:|\n`);
  for (const t of targets) {
    const a = percentiles(c1.get(t.name)!);
    const b = percentiles(c50.get(t.name)!);
    const ref = t === upstream;
    process.stdout.write(`| ${t.name} | ${fmt(a.p50, 3)} | ${fmt(a.p90, 3)} | ${ref ? '—' : fmt(a.p50 - d1.p50, 3)} | ${fmt(b.p50, 2)} | ${fmt(b.p99, 2)} | ${ref ? '—' : fmt(b.p99 - d50.p99, 2)} | ${fmt((cpuPerReq.get(t.name) ?? NaN) * 1e6, 0)} |\n`);
  }
  const [a, b] = targets.slice(1).map((t) => ({ p50: percentiles(c1.get(t.name)!).p50, cpu: cpuPerReq.get(t.name) ?? NaN }));
  const savedMs = b.p50 - a.p50;
  const savedCpu = (b.cpu - a.cpu) / b.cpu;
  process.stdout.write(`\nA against B: added TTFT p50 at concurrency 1 ${savedMs >= 0 ? '−' : '+'}${fmt(Math.abs(savedMs), 3)} ms, CPU per request at concurrency 50 ${savedCpu >= 0 ? '−' : '+'}${fmt(Math.abs(savedCpu) * 100, 1)}%. `
    + `When A is a hand-written part and B the library it replaces, the bar to keep A (0.05 ms or 10%) is ${savedMs >= 0.05 || savedCpu >= 0.1 ? 'met' : 'not met: keep the library'}.\n`);
} finally {
  await closePools(loads);
  for (const t of targets.reverse()) await t.child?.stop();
}
