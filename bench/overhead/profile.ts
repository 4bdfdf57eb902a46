/**
 * tsx bench/overhead/profile.ts — where the gateway's CPU per request goes. The overhead bench's
 * upstream and body; the gateway from dist/ under `node --cpu-prof`, one process per concurrency;
 * after a warm-up, a measured window of `--requests` streamed requests (SIGUSR2 marks it, see
 * loop-delay.mjs, which also measures the event loop's delay in it). The samples in the window
 * are attributed to the part of the request path they ran in (the innermost frame that names one:
 * a library, a src/ folder or Node's core): each busy sample an equal share of the main thread's CPU
 * time in the window (/proc/self/task), divided by the requests. Writes
 * <out>/profile.{json,md} (--heap: also the bytes allocated per request, by allocating function,
 * from V8's sampling heap profiler over the same window) and the .cpuprofile files (open them in Chrome's DevTools).
 *   tsx bench/overhead/profile.ts [--requests 3000] [--concurrency 1,50] [--out bench/out/profile] [--floor] [--heap [--survivors]] [--chunk-gap-ms 0] [--interval-us 1000] [--wall-gaps] [--gateway dist/cli.js] [--reread] [-- gateway flags]
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { fmt } from '../lib/percentiles.js';
import { freePort, startChild } from '../lib/procs.js';
import { benchBody, closedLoop } from './load.js';
import { startUpstream, waitForPort } from './targets.js';

const { values: args, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    requests: { type: 'string', default: '3000' },
    concurrency: { type: 'string', default: '1,50' },
    out: { type: 'string', default: 'bench/out/profile' },
    // The node:http + undici floor (raw-proxy.ts) under the same profiler, to compare part by part.
    floor: { type: 'boolean', default: false },
    // V8's sampling heap profiler over the same window too (it slows the process: its CPU figures are then not the plain ones).
    heap: { type: 'boolean', default: false },
    // With --heap: only the allocations that outlived the young generation (what scavenges copy and promote).
    survivors: { type: 'boolean', default: false },
    // The upstream's chunks this many ms apart (see upstream.ts): each chunk its own read, as in front of a decode loop.
    'chunk-gap-ms': { type: 'string', default: '0' },
    // The profiler's sampling interval (Node's default is 1,000 µs): finer gives a part of ~10 µs per request enough samples to be read.
    'interval-us': { type: 'string', default: '1000' },
    // Weigh each sample by its measured gap (the busy time between samples, preemption included), not by the main thread's CPU time.
    'wall-gaps': { type: 'boolean', default: false },
    // Another build's entry point (e.g. the previous commit's, built in a scratch worktree).
    gateway: { type: 'string', default: 'dist/cli.js' },
    // Attribute the profiles an earlier run left in --out again (same --concurrency and --requests), without running anything.
    reread: { type: 'boolean', default: false },
    // A flag for the profiled node itself (e.g. --single-threaded-gc: V8's collector on the main thread only).
    'node-arg': { type: 'string', multiple: true, default: [] },
  },
});
const N = Number(args.requests);
const out = resolve(args.out);
const body = benchBody(8);
const gateway = args.gateway;
if (!args.reread && !existsSync(gateway)) throw new Error(`${gateway} is missing: npm run build first`);

interface Frame { functionName: string; url: string }
interface ProfileNode { id: number; callFrame: Frame; children?: number[] }
interface HeapNode { callFrame: Frame & { lineNumber: number }; selfSize: number; children: HeapNode[] }

/** Bytes allocated in the window by the function that allocated them (sampled: V8's estimate). */
function allocations(head: HeapNode): Map<string, number> {
  const bytes = new Map<string, number>();
  const walk = (n: HeapNode) => {
    if (n.selfSize > 0) {
      const f = n.callFrame;
      const where = f.url === '' ? '' : ` ${f.url.replace(/^.*\/(node_modules|dist)\//, '$1/').replace(/^file:\/\//, '')}:${f.lineNumber + 1}`;
      const k = `${f.functionName || '(anonymous)'}${where}`;
      bytes.set(k, (bytes.get(k) ?? 0) + n.selfSize);
    }
    for (const c of n.children) walk(c);
  };
  walk(head);
  return bytes;
}

interface CpuProfile { nodes: ProfileNode[]; startTime: number; endTime: number; samples: number[]; timeDeltas: number[] }

/** The part of the request path a frame belongs to; null: look further out (a builtin, an anonymous frame). */
function partOf(f: Frame): string | null {
  if (f.functionName === '(garbage collector)') return 'GC';
  if (f.functionName === '(program)') return 'V8 / native (unattributed)';
  const u = f.url;
  if (u === '') return null;
  const lib = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(u)?.[1];
  if (lib !== undefined) {
    if (lib === 'pino' || lib === 'sonic-boom' || lib === 'fast-redact' || lib === 'quick-format-unescaped') return 'access line (pino)';
    if (lib === 'prom-client' || lib === 'bintrees' || lib === 'tdigest') return 'metrics (prom-client)';
    if (lib === 'undici') return 'undici (upstream client)';
    if (lib === 'xxhash-wasm') return 'identify';
    return `lib ${lib}`;
  }
  if (u.startsWith('node:')) return 'node core (http, net, streams)';
  // dist/, or a copy of another build (.tmp/dist-B/).
  const src = /\/dist[^/]*\/(.+)\.js$/.exec(u)?.[1];
  if (src === undefined) return null;
  if (src === 'record/record') return 'record';
  if (src === 'record/turns') return 'record: turns';
  if (src === 'telemetry/hop-clock') return 'record';
  const folder = src.split('/')[0];
  const byFolder: Record<string, string> = {
    edge: 'parse (edge)', identify: 'identify', routing: 'route', queue: 'admission', upstream: 'dispatch (upstream)',
    stream: 'tap / stream', fleet: 'fleet', store: 'store', telemetry: 'telemetry', config: 'config',
  };
  return byFolder[folder] ?? `src ${src}`;
}

function attribute(p: CpuProfile, from: number, to: number): { parts: Map<string, number>; counts: Map<string, number>; busyUs: number; idleUs: number; busySamples: number } {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const partByNode = new Map<number, string>();
  const resolvePart = (id: number): string => {
    const known = partByNode.get(id);
    if (known !== undefined) return known;
    let at: number | undefined = id;
    let part: string | null = null;
    while (at !== undefined && part === null) {
      part = partOf(byId.get(at)!.callFrame);
      at = parent.get(at);
    }
    const r = part ?? 'V8 / native (unattributed)';
    partByNode.set(id, r);
    return r;
  };
  const parts = new Map<string, number>();
  const counts = new Map<string, number>();
  let t = p.startTime;
  let busyUs = 0;
  let idleUs = 0;
  let busySamples = 0;
  for (let i = 0; i < p.samples.length; i++) {
    t += p.timeDeltas[i];
    // A sample's time is the gap to the next one.
    const dt = i + 1 < p.timeDeltas.length ? p.timeDeltas[i + 1] : 0;
    if (t < from || t > to) continue;
    const node = byId.get(p.samples[i])!;
    if (node.callFrame.functionName === '(idle)') { idleUs += dt; continue; }
    busyUs += dt;
    busySamples++;
    const part = resolvePart(node.id);
    parts.set(part, (parts.get(part) ?? 0) + dt);
    counts.set(part, (counts.get(part) ?? 0) + 1);
  }
  return { parts, counts, busyUs, idleUs, busySamples };
}

const gapMs = Number(args['chunk-gap-ms']);
const upstream = args.reread ? null : await startUpstream({ chunkGapMs: gapMs });
const results: { concurrency: number; requests: number; busyUsPerReq: number; cpuUsPerReq: number | null; threads: Record<string, number>; parts: Record<string, number>; loopDelay: unknown; wallS: number; bytesPerReq: number; allocators: [string, number][] }[] = [];
try {
  for (const c of args.concurrency.split(',').map(Number)) {
    const dir = join(out, `c${c}`);
    const delayFile = join(dir, 'loop-delay.json');
    const heapFile = join(dir, 'window.heapprofile');
    let wallS = NaN;
    if (upstream !== null) {
      rmSync(dir, { recursive: true, force: true });
      mkdirSync(dir, { recursive: true });
      const [port, admin] = [await freePort(), await freePort()];
      const profiled = [...args['node-arg'], '--cpu-prof', `--cpu-prof-dir=${dir}`, `--cpu-prof-interval=${Number(args['interval-us'])}`, '--import', resolve('bench/overhead/loop-delay.mjs')];
      const gw = await startChild(process.execPath, args.floor
        ? [...profiled, '--import', 'tsx', 'bench/overhead/raw-proxy.ts', '--port', String(port), '--upstream', upstream.url]
        : [...profiled, gateway, 'serve', '--upstream', upstream.url, '--host', '127.0.0.1', '--port', String(port), '--admin-host', '127.0.0.1', '--admin-port', String(admin), '--log-level', 'info', ...positionals],
      null, { group: true, env: { WARMROUTE_LOOP_DELAY_FILE: delayFile, ...(args.heap ? { WARMROUTE_HEAP_PROFILE_FILE: heapFile, WARMROUTE_HEAP_SURVIVORS: args.survivors ? '1' : '0' } : {}), WARMROUTE_EXIT_ON_TERM: args.floor ? "1" : "0" } });
      await waitForPort(args.floor ? port : admin, 20_000);
      const pool = new Pool(`http://127.0.0.1:${port}`, { connections: c });
      await closedLoop(pool, body, c, Math.max(500, c * 20), 'warm');
      gw.proc.kill('SIGUSR2');
      const t0 = Date.now();
      await closedLoop(pool, body, c, N, `p${c}`);
      wallS = (Date.now() - t0) / 1000;
      gw.proc.kill('SIGUSR2');
      await pool.close();
      await gw.stop();
    }
    const { marks, cpuMarks, threadMarks, loopDelay } = JSON.parse(readFileSync(delayFile, 'utf8')) as { marks: number[]; cpuMarks?: (number | null)[]; threadMarks?: (Record<string, number> | null)[]; loopDelay: unknown };
    // Each thread name's CPU in the window, µs per request (threads that ended inside it are missed).
    const threads: Record<string, number> = {};
    const [t0m, t1m] = [threadMarks?.[0], threadMarks?.[1]];
    if (t0m && t1m) for (const [name, us] of Object.entries(t1m)) threads[name] = (us - (t0m[name] ?? 0)) / N;
    const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'))!;
    const prof = JSON.parse(readFileSync(join(dir, file), 'utf8')) as CpuProfile;
    const attributed = attribute(prof, marks[0], marks[1]);
    const { busyUs } = attributed;
    // A sample's gap to the next also holds the time the thread was not running (preempted on a
    // loaded machine: gaps of milliseconds), so by default each busy sample counts the same and
    // the samples share the main thread's own CPU time in the window (/proc); --wall-gaps: the gaps as measured.
    const cpuUs = cpuMarks?.[0] != null && cpuMarks[1] != null ? cpuMarks[1] - cpuMarks[0] : null;
    const parts = cpuUs === null || args['wall-gaps']
      ? attributed.parts
      : new Map([...attributed.counts].map(([k, n]) => [k, (n / attributed.busySamples) * cpuUs]));
    const allocated = existsSync(heapFile) ? allocations((JSON.parse(readFileSync(heapFile, 'utf8')) as { head: HeapNode }).head) : new Map<string, number>();
    const bytesPerReq = [...allocated.values()].reduce((a, b) => a + b, 0) / N;
    const allocators = [...allocated].sort((a, b) => b[1] - a[1]).slice(0, 25).map(([k, v]): [string, number] => [k, v / N]);
    results.push({ concurrency: c, requests: N, busyUsPerReq: busyUs / N, cpuUsPerReq: cpuUs === null ? null : cpuUs / N, threads, parts: Object.fromEntries([...parts].sort((a, b) => b[1] - a[1]).map(([k, v]) => [k, v / N])), loopDelay, wallS, bytesPerReq, allocators });
  }
} finally {
  await upstream?.child?.stop();
}

const names = [...new Set(results.flatMap((r) => Object.keys(r.parts)))];
const lines = [
  `# Where the gateway's CPU per request goes (${new Date().toISOString()})`,
  '',
  `Main-thread CPU profile (node --cpu-prof) of ${args.floor ? "the node:http + undici floor (raw-proxy.ts)" : gateway}, ${N} streamed requests per concurrency after a warm-up, the overhead bench's upstream (chunks ${gapMs > 0 ? `${gapMs} ms apart` : 'one per tick'}) and 8 KiB body, --log-level info. µs per request by the innermost frame that names a part${args['wall-gaps'] ? ', each sample weighed by its gap' : ', each busy sample an equal share of the main thread\'s CPU time in the window (/proc)'}.`,
  '',
  `| part | ${results.map((r) => `c=${r.concurrency} µs/req`).join(' | ')} |`,
  `|---|${results.map(() => '---:').join('|')}|`,
  ...names.map((n) => `| ${n} | ${results.map((r) => fmt(r.parts[n] ?? 0, 1)).join(' | ')} |`),
  `| **total: main thread CPU (/proc)** | ${results.map((r) => `**${r.cpuUsPerReq === null ? '?' : fmt(r.cpuUsPerReq, 1)}**`).join(' | ')} |`,
  `| busy between samples (wall, preemption included) | ${results.map((r) => fmt(r.busyUsPerReq, 1)).join(' | ')} |`,
  '',
  'Every thread\'s CPU in the window (/proc/self/task, by thread name; `main` is the row above; the CPU profiler\'s own thread runs only because of --cpu-prof):',
  '',
  `| thread | ${results.map((r) => `c=${r.concurrency} µs/req`).join(' | ')} |`,
  `|---|${results.map(() => '---:').join('|')}|`,
  ...[...new Set(results.flatMap((r) => Object.keys(r.threads)))].map((n) => `| ${n} | ${results.map((r) => fmt(r.threads[n] ?? 0, 1)).join(' | ')} |`),
  `| **all threads** | ${results.map((r) => `**${fmt(Object.values(r.threads).reduce((a, b) => a + b, 0), 1)}**`).join(' | ')} |`,
  '',
  ...results.map((r) => `c=${r.concurrency}: event loop delay in the window ${JSON.stringify(r.loopDelay)}; ${fmt(r.requests / r.wallS, 0)} requests/s.`),
  ...results.filter((r) => r.allocators.length > 0).flatMap((r) => [
    '',
    `c=${r.concurrency}: ${fmt(r.bytesPerReq, 0)} bytes ${args.survivors ? 'allocated per request that outlived the young generation' : 'allocated per request'} in the window (V8's sampling heap profiler), the largest allocators:`,
    '',
    '| allocated by | bytes / request |',
    '|---|---:|',
    ...r.allocators.map(([k, v]) => `| \`${k}\` | ${fmt(v, 0)} |`),
  ]),
];
mkdirSync(out, { recursive: true });
writeFileSync(join(out, 'profile.json'), JSON.stringify(results, null, 1));
writeFileSync(join(out, 'profile.md'), `${lines.join('\n')}\n`);
process.stdout.write(`${lines.join('\n')}\n`);
