/**
 * npm run bench:overhead — what does the gateway add to time-to-first-token?
 * Same simple upstream, same client, one run: direct vs through warmroute, and references: Node
 * floors (node:http + undici, the same behind a fastify route, a bare TCP pipe), a naive
 * fastify+reply-from proxy, and nginx (hash $http_x_session_id consistent) when installed; at
 * concurrency 1 and 50, streaming. Concurrency 1 is measured twice: steady (blocks of requests to
 * one target, as a `wrk -c1` run would) and interleaved (one request per target in turn, so each
 * request finds the target idle and its caches cold after the others ran). Also the CPU each
 * target spends per request (/proc). --production adds the gateway as a production config has it,
 * one feature per row so each one's cost shows: turns off (caller turns are on by default); KV cache
 * events from the upstream (a steady trickle of stored and removed blocks); tracing to an OTLP/HTTP
 * collector on loopback (a sink that reads and drops each export) at the default sampler
 * (parentbased_always_on: every request traced) and at 10% (parentbased_traceidratio 0.1); and all
 * of them at once (turns, KV events, tracing at the default). Writes bench/out/overhead.{json,md}.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { cpus } from 'node:os';
import { parseArgs } from 'node:util';
import { fmt, percentiles, type Percentiles } from './lib/percentiles.js';
import { call } from './lib/http.js';
import { histogramQuantile } from './lib/prom.js';
import { benchBody, closePools, interleaved, loaded, rotatedRounds, steadyBlocks, warm } from './overhead/load.js';
import { gatewayConfigFile, nginxPath, startNaive, startNginx, startRawNode, startFastifyUndici, startTcpPipe, startUpstream, startWarmroute, type Target } from './overhead/targets.js';

const { values: args } = parseArgs({
  options: {
    requests: { type: 'string', default: '600' },
    block: { type: 'string', default: '50' },
    'requests-50': { type: 'string', default: '4000' },
    rounds: { type: 'string', default: '4' },
    'body-kb': { type: 'string', default: '8' },
    // The upstream's chunks after the first this many ms apart (bench/overhead/upstream.ts); 0: one per tick.
    'chunk-gap-ms': { type: 'string', default: '0' },
    'no-nginx': { type: 'boolean', default: false },
    'no-naive': { type: 'boolean', default: false },
    'no-raw': { type: 'boolean', default: false },
    out: { type: 'string', default: 'bench/out' },
    production: { type: 'boolean', default: false },
  },
});
const N1 = Number(args.requests);
const BLOCK = Math.max(1, Number(args.block));
const N50 = Number(args['requests-50']);
const ROUNDS = Number(args.rounds);
const body = benchBody(Number(args['body-kb']));
const progress = (s: string) => process.stderr.write(`\r\x1b[K${s}`);

const upstream = await startUpstream({ kv: args.production, chunkGapMs: Number(args['chunk-gap-ms']) });
const targets: Target[] = [upstream, await startWarmroute(upstream.url, ['--log-level', 'info'])];
// The trace collector of the --production rows: reads each export and answers 200, nothing else.
let exports = 0;
const collector = args.production ? createServer((req, res) => { req.resume(); req.on('end', () => { exports++; res.end(); }); }) : null;
if (collector) await new Promise<void>((r) => collector.listen(0, '127.0.0.1', () => r()));
if (args.production) {
  const info = ['--log-level', 'info'];
  const endpoint = `http://127.0.0.1:${(collector!.address() as AddressInfo).port}`;
  const gateway = async (name: string, config: Record<string, unknown>) =>
    targets.push(await startWarmroute('', ['--config', gatewayConfigFile({ upstreams: [{ url: upstream.url }], ...config }), ...info], undefined, name));
  await gateway('warmroute, turns off', { turns: { enabled: false } });
  await gateway('warmroute + KV events', { upstreams: [{ url: upstream.url, kvEvents: upstream.kvEvents }] });
  await gateway('warmroute + tracing (default sampler)', { tracing: { endpoint } });
  await gateway('warmroute + tracing 10%', { tracing: { endpoint, sampler: 'parentbased_traceidratio', samplerArg: 0.1 } });
  await gateway('warmroute, production (turns, KV events, tracing)', { upstreams: [{ url: upstream.url, kvEvents: upstream.kvEvents }], tracing: { endpoint } });
}
if (!args['no-raw']) {
  targets.push(await startRawNode(upstream.url));
  targets.push(await startFastifyUndici(upstream.url));
  targets.push(await startTcpPipe(upstream.url));
}
if (!args['no-naive']) targets.push(await startNaive(upstream.url));
const nginx = args['no-nginx'] ? null : nginxPath();
if (nginx) targets.push(await startNginx(nginx, upstream.url));
else if (!args['no-nginx']) process.stderr.write('nginx not installed: the C reference is skipped (apt-get install nginx)\n');

const loads = targets.map(loaded);

try {
  await warm(loads, body, progress);
  const c1Steady = await steadyBlocks(loads, body, N1, BLOCK, progress);
  const c1 = await interleaved(loads, body, N1, progress);
  // CPU per request of each target's own process during the concurrency-50 blocks; for
  // "direct" that is the upstream itself.
  const { ttft: c50, cpuPerReq } = await rotatedRounds(loads, body, N50, ROUNDS, progress);
  progress('');

  const wr = targets.find((t) => t.name === 'warmroute')!;
  const metricsText = await (await call(`${wr.adminUrl}/metrics`)).text();
  const selfReported = {
    overheadP50Ms: (histogramQuantile(metricsText, 'warmroute_gateway_overhead_seconds', 0.5) ?? NaN) * 1000,
    overheadP99Ms: (histogramQuantile(metricsText, 'warmroute_gateway_overhead_seconds', 0.99) ?? NaN) * 1000,
  };

  const rows: { concurrency: number | string; target: string; ttft: Percentiles; added: { p50: number; p90: number; p99: number } | null }[] = [];
  for (const [conc, data] of [['1 steady', c1Steady], ['1 interleaved', c1], [50, c50]] as const) {
    const direct = percentiles(data.get('direct')!);
    for (const t of targets) {
      const p = percentiles(data.get(t.name)!);
      rows.push({ concurrency: conc, target: t.name, ttft: p, added: t.name === 'direct' ? null : { p50: p.p50 - direct.p50, p90: p.p90 - direct.p90, p99: p.p99 - direct.p99 } });
    }
  }
  const added = (conc: number | string, name: string) => rows.find((r) => r.concurrency === conc && r.target === name)?.added ?? null;
  const wr1 = added('1 steady', 'warmroute')!;
  const wr1i = added('1 interleaved', 'warmroute')!;
  const floor1 = added('1 steady', 'node:http+undici');
  const floor1i = added('1 interleaved', 'node:http+undici');
  const cpu = (name: string) => cpuPerReq.get(name) ?? null;
  const floorCpu = cpu('node:http+undici');
  // The request path's budget: against the bare node:http + undici proxy measured in the same run.
  // A ratio to the floor's added p99 says something only when that is above direct's own noise.
  const floor50Raw = added(50, 'node:http+undici');
  const floor50 = floor50Raw !== null && floor50Raw.p99 > 0 ? floor50Raw : null;
  const wr50 = added(50, 'warmroute')!;
  const goals = {
    addedP50AtC1Ms: wr1.p50,
    floorAddedP50AtC1Ms: floor1?.p50 ?? null,
    addedP50AtC1AboveFloorMs: floor1 ? wr1.p50 - floor1.p50 : null,
    addedP50AtC1Goal: '≤ floor + 0.1 ms',
    addedP50AtC1Met: floor1 ? wr1.p50 <= floor1.p50 + 0.1 : null,
    addedP50AtC1InterleavedAboveFloorMs: floor1i ? wr1i.p50 - floor1i.p50 : null,
    addedP99AtC50Ms: wr50.p99,
    floorAddedP99AtC50Ms: floor50?.p99 ?? null,
    addedP99AtC50Ratio: floor50 ? wr50.p99 / floor50.p99 : null,
    addedP99AtC50Goal: 1.5,
    addedP99AtC50Met: floor50 ? wr50.p99 / floor50.p99 <= 1.5 : null,
    cpuPerRequestAtC50Us: (cpu('warmroute') ?? NaN) * 1e6,
    floorCpuPerRequestAtC50Us: floorCpu === null ? null : floorCpu * 1e6,
    cpuRatioToFloor: floorCpu ? (cpu('warmroute') ?? NaN) / floorCpu : null,
    cpuRatioGoal: 1.3,
    cpuRatioMet: floorCpu ? (cpu('warmroute') ?? NaN) / floorCpu <= 1.3 : null,
  };
  const ratios = floorCpu && floor1
    ? targets.filter((t) => t.name.startsWith('warmroute')).map((t) => {
      const a1 = added('1 steady', t.name)!;
      const a50 = added(50, t.name)!;
      return `| ${t.name} | +${fmt(a1.p50 - floor1.p50, 3)} | ${floor50 ? `${fmt(a50.p99 / floor50.p99, 2)}×` : 'n/a'} | ${fmt((cpu(t.name) ?? NaN) / floorCpu, 2)}× (${fmt((cpu(t.name) ?? NaN) * 1e6, 0)} µs) |`;
    })
    : [];

  const lines = [
    `# Gateway overhead (${new Date().toISOString()})`,
    '',
    `Machine: ${cpus().length} × ${cpus()[0]?.model ?? '?'}, Node ${process.version}. Request body ${args['body-kb']} KiB, streaming (the upstream's chunks ${Number(args['chunk-gap-ms']) > 0 ? `${args['chunk-gap-ms']} ms apart` : 'one per tick'}), client TTFT = request sent → first content chunk.`,
    `Requests per target: ${N1} at concurrency 1 steady (rotated blocks of ${BLOCK}), ${N1} at concurrency 1 interleaved (one per target in turn), ${N50} at concurrency 50 (${ROUNDS} rotated rounds).`,
    '',
    '| concurrency | target | TTFT p50 ms | p90 | p99 | added p50 ms | added p90 | added p99 | CPU µs/request |',
    '|---:|---|---:|---:|---:|---:|---:|---:|---:|',
    ...rows.map((r) => `| ${r.concurrency} | ${r.target} | ${fmt(r.ttft.p50, 3)} | ${fmt(r.ttft.p90, 3)} | ${fmt(r.ttft.p99, 3)} | ${r.added ? fmt(r.added.p50, 3) : '—'} | ${r.added ? fmt(r.added.p90, 3) : '—'} | ${r.added ? fmt(r.added.p99, 3) : '—'} | ${r.concurrency === 50 && cpuPerReq.has(r.target) ? fmt(cpuPerReq.get(r.target)! * 1e6, 0) : ''} |`),
    '',
    `warmroute's own account (warmroute_gateway_overhead_seconds, all requests incl. warm-up): p50 ${fmt(selfReported.overheadP50Ms, 3)} ms, p99 ${fmt(selfReported.overheadP99Ms, 3)} ms.`,
    '',
    goals.addedP50AtC1Met === null
      ? 'Goals are judged against node:http+undici: run without --no-raw.'
      : `Goal: added TTFT p50 at concurrency 1 ≤ node:http+undici's + 0.1 ms → steady ${fmt(wr1.p50, 3)} vs ${fmt(goals.floorAddedP50AtC1Ms!, 3)} ms (+${fmt(goals.addedP50AtC1AboveFloorMs!, 3)}, ${goals.addedP50AtC1Met ? 'met' : 'NOT met'}); interleaved +${fmt(goals.addedP50AtC1InterleavedAboveFloorMs!, 3)} ms.`,
    goals.addedP99AtC50Met === null
      ? (floor50Raw !== null ? `Goal: added TTFT p99 at concurrency 50 ≤ 1.5 × node:http+undici's → not judged: the floor's added p99 (${fmt(floor50Raw.p99, 3)} ms) is within direct's own noise in this run.` : '')
      : `Goal: added TTFT p99 at concurrency 50 ≤ 1.5 × node:http+undici's → ${fmt(goals.addedP99AtC50Ms, 3)} vs ${fmt(goals.floorAddedP99AtC50Ms!, 3)} ms = ${fmt(goals.addedP99AtC50Ratio!, 2)}× (${goals.addedP99AtC50Met ? 'met' : 'NOT met'}).`,
    goals.cpuRatioMet === null
      ? ''
      : `Goal: CPU per request at concurrency 50 ≤ 1.3 × node:http+undici's → ${fmt(goals.cpuPerRequestAtC50Us, 0)} vs ${fmt(goals.floorCpuPerRequestAtC50Us!, 0)} µs = ${fmt(goals.cpuRatioToFloor!, 2)}× (${goals.cpuRatioMet ? 'met' : 'NOT met'}).`,
    ...(collector ? ['', `The tracing rows exported to a loopback OTLP/HTTP collector: ${exports} exports in the run.`] : []),
    ...(ratios.length ? ['', 'Against the floor (node:http+undici), this run:', '', '| gateway | added TTFT p50 c=1 above the floor, ms | added p99 c=50 / the floor\'s | CPU per request c=50 / the floor\'s |', '|---|---:|---:|---:|', ...ratios] : []),
  ];
  const report = lines.join('\n');
  mkdirSync(args.out, { recursive: true });
  writeFileSync(`${args.out}/overhead.json`, JSON.stringify({ when: new Date().toISOString(), node: process.version, cpus: cpus().length, args, rows, selfReported, goals, cpuMicrosPerRequest: Object.fromEntries([...cpuPerReq].map(([k, v]) => [k, v * 1e6])), raw: { c1Steady: Object.fromEntries(c1Steady), c1Interleaved: Object.fromEntries(c1), c50: Object.fromEntries(c50) } }, null, 1));
  writeFileSync(`${args.out}/overhead.md`, `${report}\n`);
  process.stdout.write(`${report}\n\nwrote ${args.out}/overhead.json and ${args.out}/overhead.md\n`);
} finally {
  await closePools(loads);
  for (const t of targets.reverse()) await t.child?.stop();
  collector?.close();
}
