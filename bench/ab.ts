/**
 * npm run bench:ab -- --b PATH/TO/OTHER/dist/cli.js [--a dist/cli.js] [--blocks 40] [--rounds 6]
 *                     [--route chat|completions] [--body-kb 8] [--chunk-gap-ms 0]
 *                     [--a-env K=V]... [--b-env K=V]... [--a-arg ARG]... [--b-arg ARG]...
 * Two gateway builds, A and B, against the same simple upstream in one run, with direct as the
 * reference: concurrency 1 steady (rotated blocks of 50 requests) and concurrency 50 (rotated
 * rounds of 1,000), client TTFT percentiles and each gateway's CPU per request. For "does this
 * hand-written part earn its place?": build the other variant in a git worktree and point --b at
 * it; the verdict line applies the project's rule (≥ 0.05 ms added TTFT p50 at concurrency 1, or
 * ≥ 10% CPU per request at concurrency 50).
 * --a-env / --b-env add a variable to one side's environment and --a-arg / --b-arg an argument to its
 * `serve`, so one build can be compared with itself configured otherwise (e.g. tracing on:
 * `--b-env OTEL_EXPORTER_OTLP_TRACES_ENDPOINT={sink} --b-env OTEL_TRACES_SAMPLER=always_on`).
 * `{sink}` in a value is the URL of a loopback OTLP/HTTP receiver this process runs, which takes
 * every POST and answers 200 with an empty body (what a collector that accepts everything says).
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
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
    'a-env': { type: 'string', multiple: true, default: [] },
    'b-env': { type: 'string', multiple: true, default: [] },
    'a-arg': { type: 'string', multiple: true, default: [] },
    'b-arg': { type: 'string', multiple: true, default: [] },
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

const needsSink = [...args['a-env'], ...args['b-env'], ...args['a-arg'], ...args['b-arg']].some((v) => v.includes('{sink}'));
let sinkPosts = 0;
const sink = needsSink ? createServer((req, res) => { req.resume(); req.on('end', () => { sinkPosts++; res.end(); }); }) : null;
if (sink) await new Promise<void>((r) => sink.listen(0, '127.0.0.1', () => r()));
const sinkUrl = sink ? `http://127.0.0.1:${(sink.address() as AddressInfo).port}/v1/traces` : '';
const filled = (v: string) => v.replaceAll('{sink}', sinkUrl);

function envOf(pairs: string[]): Record<string, string> {
  const env: Record<string, string> = {};
  for (const p of pairs) {
    const eq = p.indexOf('=');
    if (eq <= 0) {
      process.stderr.write(`--a-env / --b-env want NAME=VALUE, got ${JSON.stringify(p)}\n`);
      process.exit(2);
    }
    env[p.slice(0, eq)] = filled(p.slice(eq + 1));
  }
  return env;
}

const upstream = await startUpstream({ chunkGapMs: Number(args['chunk-gap-ms']) });
const targets: Target[] = [upstream];
for (const [name, entry, env, extra] of [['A', args.a, args['a-env'], args['a-arg']], ['B', args.b, args['b-env'], args['b-arg']]] as const) {
  const label = [name, entry, ...env, ...extra].join(' ');
  targets.push(await startWarmroute(upstream.url, ['--log-level', 'info', ...extra.map(filled)], entry, label, envOf(env)));
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
  if (sink) {
    process.stdout.write(`OTLP sink: ${sinkPosts} exports received\n`);
    sink.close();
  }
}
