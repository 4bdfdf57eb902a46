/**
 * npm run bench:realtime — what does relaying realtime transcription (/v1/realtime, WebSocket) cost?
 * One run, three parts:
 *  1. latency: N concurrent connections (50) each sending a 20 ms audio frame (an
 *     input_audio_buffer.append of 640 bytes of PCM16, base64) every 20 ms, to a replica in this
 *     process that answers one transcription.delta per 5 frames; direct and through the gateway in
 *     alternating rounds. Each frame's one-way time (client → replica, replica → client) is read on
 *     this process's one clock; the gateway's added latency is the difference of the percentiles.
 *  2. ordering: 50 connections at once through the gateway each send 10,000 frames of random sizes
 *     (1 B–16 KiB), text and binary mixed, to an echo replica: lost, duplicated, reordered and
 *     altered frames counted, each frame checked byte for byte.
 *  3. a replica killed mid-utterance: the simulator (its own process) streams deltas through the
 *     gateway; it is SIGKILLed after the first delta; the time until the client's close, its code
 *     and reason.
 * `--parts latency` runs the first part only, `--gateway` / `--gateway-env` start another build or
 * the same one with other variables (an A/B of the relay, a CPU profile). Writes
 * bench/out/realtime.{json,md}.
 */
import { randomBytes, randomInt } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadavg } from 'node:os';
import { execFileSync } from 'node:child_process';
import { parseArgs } from 'node:util';
import WebSocket, { WebSocketServer } from 'ws';
import { fmt, percentiles, type Percentiles } from './lib/percentiles.js';
import { cpuSecondsOf } from './lib/cpu.js';
import { freePort, startChildLines, TSX, type Child } from './lib/procs.js';
import { gatewayConfigFile, gatewayEntry, startWarmroute, type Target } from './overhead/targets.js';
import { DEFAULT_MODEL } from './sim/config.js';

const { values: args } = parseArgs({
  options: {
    connections: { type: 'string', default: '50' },
    'round-s': { type: 'string', default: '6' },
    rounds: { type: 'string', default: '2' },
    'order-connections': { type: 'string', default: '50' },
    'order-frames': { type: 'string', default: '10000' },
    'order-max-bytes': { type: 'string', default: String(16 * 1024) },
    kills: { type: 'string', default: '5' },
    // Which parts run (a latency A/B of two builds needs only the first).
    parts: { type: 'string', default: 'latency,order,kill' },
    // Another build's entry point (e.g. the previous commit's dist/cli.js), and variables for the
    // gateway's process (NODE_OPTIONS=--cpu-prof, WS_NO_BUFFER_UTIL=1): what an A/B compares.
    gateway: { type: 'string' },
    'gateway-env': { type: 'string', multiple: true, default: [] },
    // node's own flags for the gateway (--cpu-prof, which NODE_OPTIONS does not take).
    'gateway-node-arg': { type: 'string', multiple: true, default: [] },
    // CPU lists (taskset's form, "1" or "0-1") for the gateway's process and this one's: whether the
    // relay's tail is its own work or a wait for a core shared with the clients and the replica.
    'gateway-cpus': { type: 'string' },
    'bench-cpus': { type: 'string' },
    out: { type: 'string', default: 'bench/out' },
  },
});
/** Binds every thread of `pid` to `cpus` (taskset -a: Node's helper threads too). */
function pin(pid: number, cpus: string): void {
  execFileSync('taskset', ['-a', '-p', '-c', cpus, String(pid)], { stdio: 'ignore' });
}
if (args['bench-cpus']) pin(process.pid, args['bench-cpus']);
const PARTS = new Set(args.parts!.split(','));
for (const part of PARTS) if (!['latency', 'order', 'kill'].includes(part)) throw new Error(`--parts: unknown part ${part} (latency, order, kill)`);
const GATEWAY_ENV: NodeJS.ProcessEnv = Object.fromEntries(args['gateway-env']!.map((kv) => {
  const at = kv.indexOf('=');
  if (at <= 0) throw new Error(`--gateway-env wants NAME=VALUE, got ${kv}`);
  return [kv.slice(0, at), kv.slice(at + 1)];
}));

/** A gateway of this checkout's build (or --gateway's), ready once its health probe saw every replica up. */
async function startGateway(config: Record<string, unknown>): Promise<Target> {
  const entry = [...args['gateway-node-arg']!, ...(args.gateway ? [args.gateway] : gatewayEntry())];
  const t = await startWarmroute('', ['--config', gatewayConfigFile(config), '--log-level', 'warn'], entry, 'warmroute', GATEWAY_ENV);
  if (args['gateway-cpus'] && t.child?.proc.pid !== undefined) pin(t.child.proc.pid, args['gateway-cpus']);
  for (let i = 0; ; i++) {
    const r = (await (await fetch(`${t.adminUrl}/admin/replicas`)).json()) as { replicas: { state: string }[] };
    if (r.replicas.every((x) => x.state === 'up')) return t;
    if (i === 100) throw new Error(`the gateway saw no replica up within 10 s: ${JSON.stringify(r.replicas)}`);
    await new Promise((res) => setTimeout(res, 100));
  }
}
const CONNS = Number(args.connections);
const ROUND_MS = Number(args['round-s']) * 1000;
const ROUNDS = Number(args.rounds);
const ORDER_CONNS = Number(args['order-connections']);
const ORDER_FRAMES = Number(args['order-frames']);
const KILLS = Number(args.kills);
const FRAME_MS = 20;
/** Frames at the start of a round not measured (connections opening, JIT). */
const WARMUP_MS = 1_000;
const progress = (s: string) => process.stderr.write(`\r\x1b[K${s}`);
const load0 = loadavg()[0];

// ---- the in-process replica: times every frame it reads, answers a delta every 5 frames ----

interface Timing {
  /** Per connection: the send times of its frames not yet read by the replica (FIFO). */
  sent: Map<number, number[]>;
  /** The replica's send times of its deltas not yet read by the client. */
  deltas: Map<number, number[]>;
  up: number[];
  down: number[];
  measuring: boolean;
  /** echo: every message sent back as it came (the ordering part). */
  echo: boolean;
}
const timing: Timing = { sent: new Map(), deltas: new Map(), up: [], down: [], measuring: false, echo: false };
const SESSION_CREATED = () => JSON.stringify({ type: 'session.created', id: `sess-${randomBytes(16).toString('hex')}`, created: Math.floor(Date.now() / 1000) });
const DELTA = JSON.stringify({ type: 'transcription.delta', delta: ' hello' });

async function startReplica(): Promise<{ url: string; server: Server }> {
  const server = createServer((req, res) => {
    if (req.url === '/v1/models') { res.writeHead(200, { 'content-type': 'application/json' }); res.end(JSON.stringify({ object: 'list', data: [{ id: 'bench-asr', object: 'model' }] })); return; }
    res.writeHead(req.url === '/health' || req.url === '/metrics' ? 200 : 404);
    res.end();
  });
  const wss = new WebSocketServer({ server, path: '/v1/realtime', perMessageDeflate: false });
  wss.on('connection', (ws, req: IncomingMessage) => {
    const id = Number(new URL(req.url ?? '', 'http://x').searchParams.get('conn') ?? -1);
    ws.send(SESSION_CREATED());
    let n = 0;
    ws.on('message', (data, isBinary) => {
      if (timing.echo) return ws.send(data as Buffer, { binary: isBinary });
      const now = performance.now();
      const t0 = timing.sent.get(id)?.shift();
      if (t0 !== undefined && timing.measuring) timing.up.push(now - t0);
      if (++n % 5 === 0) {
        let q = timing.deltas.get(id);
        if (q === undefined) timing.deltas.set(id, (q = []));
        q.push(performance.now());
        ws.send(DELTA);
      }
    });
    ws.on('error', () => {});
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

const wsUrl = (base: string, query: string) => `${base.replace(/^http/, 'ws')}/v1/realtime${query}`;

function open(url: string): Promise<WebSocket> {
  const ws = new WebSocket(url, { perMessageDeflate: false });
  return new Promise((resolve, reject) => {
    ws.once('message', () => resolve(ws));
    ws.once('error', reject);
    ws.once('unexpected-response', (_q, res) => reject(new Error(`HTTP ${res.statusCode}`)));
  });
}

// ---- part 1: latency per frame ----

const AUDIO_FRAME = JSON.stringify({ type: 'input_audio_buffer.append', audio: randomBytes(16 * FRAME_MS * 2).toString('base64') });

let framesSent = 0;

async function latencyRound(base: string, firstId: number): Promise<{ up: number[]; down: number[]; frames: number }> {
  framesSent = 0;
  let framesGot = 0;
  timing.up = [];
  timing.down = [];
  timing.measuring = false;
  const conns: { ws: WebSocket; id: number }[] = [];
  for (let i = 0; i < CONNS; i++) {
    const id = firstId + i;
    timing.sent.set(id, []);
    timing.deltas.set(id, []);
    const ws = await open(wsUrl(base, `?conn=${id}`));
    ws.on('message', () => {
      framesGot++;
      const t0 = timing.deltas.get(id)?.shift();
      if (t0 !== undefined && timing.measuring) timing.down.push(performance.now() - t0);
    });
    conns.push({ ws, id });
  }
  // Each connection on its own 20 ms clock, their phases spread over one frame period.
  const timers: NodeJS.Timeout[] = [];
  for (const [i, c] of conns.entries()) {
    setTimeout(() => {
      timers.push(setInterval(() => {
        timing.sent.get(c.id)!.push(performance.now());
        framesSent++;
        c.ws.send(AUDIO_FRAME);
      }, FRAME_MS));
    }, (i * FRAME_MS) / CONNS);
  }
  await new Promise((r) => setTimeout(r, WARMUP_MS));
  timing.measuring = true;
  await new Promise((r) => setTimeout(r, ROUND_MS));
  timing.measuring = false;
  for (const t of timers) clearInterval(t);
  await Promise.all(conns.map((c) => new Promise<void>((r) => { c.ws.once('close', () => r()); c.ws.close(); })));
  return { up: timing.up, down: timing.down, frames: framesSent + framesGot };
}

// ---- part 2: ordering ----

interface OrderResult { frames: number; received: number; lost: number; duplicated: number; reordered: number; altered: number }

/**
 * Frame contents are slices of two random buffers at a random offset: a received frame is checked
 * byte for byte against the slice it was cut from (memcmp, no hash of gigabytes of frames), and its
 * sequence number, which every frame carries, catches one frame arriving in another's place.
 */
const ORDER_MAX = Number(args['order-max-bytes']);
const BASE_BIN = randomBytes(2 * ORDER_MAX);
const BASE_TXT = Buffer.from(randomBytes(Math.ceil((2 * ORDER_MAX * 3) / 4)).toString('base64'), 'latin1');
const TXT_HEAD = '{"type":"input_audio_buffer.append","seq":';
const TXT_AUDIO = ',"audio":"';
/** A connection that got nothing for this long has lost what is still missing. */
const ORDER_STALL_MS = 30_000;

interface Sent { binary: Uint8Array; offset: Int32Array; size: Int32Array }

function orderFrame(seq: number, sent: Sent): { frame: Buffer; binary: boolean } {
  const binary = randomInt(2) === 1;
  const size = randomInt(1, ORDER_MAX + 1);
  const offset = randomInt(ORDER_MAX);
  sent.binary[seq] = binary ? 1 : 0;
  sent.offset[seq] = offset;
  sent.size[seq] = size;
  if (binary) {
    const frame = Buffer.allocUnsafe(4 + size);
    frame.writeUInt32BE(seq, 0);
    BASE_BIN.copy(frame, 4, offset, offset + size);
    return { frame, binary };
  }
  return { frame: Buffer.concat([Buffer.from(`${TXT_HEAD}${seq}${TXT_AUDIO}`), BASE_TXT.subarray(offset, offset + size), Buffer.from('"}')]), binary };
}

/** The frame's sequence number, and whether it is byte for byte the frame of that number sent; -1 when unreadable. */
function checkFrame(d: Buffer, isBinary: boolean, sent: Sent): { seq: number; intact: boolean } {
  let seq: number;
  let body: Buffer;
  if (isBinary) {
    if (d.length < 4) return { seq: -1, intact: false };
    seq = d.readUInt32BE(0);
    body = d.subarray(4);
  } else {
    const start = TXT_HEAD.length;
    const comma = d.indexOf(0x2c, start);
    seq = comma > start && d.subarray(0, start).toString('latin1') === TXT_HEAD ? Number(d.toString('latin1', start, comma)) : -1;
    const audio = comma + TXT_AUDIO.length;
    body = d.subarray(audio, d.length - 2);
  }
  if (!(seq >= 0 && seq < sent.size.length)) return { seq: -1, intact: false };
  const from = sent.offset[seq];
  const base = isBinary ? BASE_BIN : BASE_TXT;
  const intact = (sent.binary[seq] === 1) === isBinary && body.length === sent.size[seq] && body.equals(base.subarray(from, from + sent.size[seq]));
  return { seq, intact };
}

async function orderingConnection(base: string, id: number): Promise<OrderResult> {
  const ws = await open(wsUrl(base, `?conn=${id}`));
  const sent: Sent = { binary: new Uint8Array(ORDER_FRAMES), offset: new Int32Array(ORDER_FRAMES), size: new Int32Array(ORDER_FRAMES) };
  const seen = new Uint32Array(ORDER_FRAMES);
  let received = 0;
  let reordered = 0;
  let altered = 0;
  let last = -1;
  let lastAt = performance.now();
  const done = new Promise<void>((resolve) => {
    ws.on('message', (d: Buffer, isBinary) => {
      received++;
      lastAt = performance.now();
      const { seq, intact } = checkFrame(d, isBinary, sent);
      if (!intact) altered++;
      if (seq >= 0) {
        seen[seq]++;
        if (seq < last) reordered++;
        last = seq;
      }
      if (received === ORDER_FRAMES) resolve();
    });
    ws.on('close', () => resolve());
  });
  for (let seq = 0; seq < ORDER_FRAMES; seq++) {
    const { frame, binary } = orderFrame(seq, sent);
    // Back-pressure: past 1 MiB waiting, the next send waits for its own write.
    if (ws.bufferedAmount > 1024 * 1024) await new Promise<void>((r) => ws.send(frame, { binary }, () => r()));
    else ws.send(frame, { binary });
  }
  lastAt = performance.now();
  // Bounded: done, or nothing came back for ORDER_STALL_MS (the rest is then lost).
  while (received < ORDER_FRAMES && ws.readyState === WebSocket.OPEN && performance.now() - lastAt < ORDER_STALL_MS) {
    await Promise.race([done, new Promise((r) => setTimeout(r, 500))]);
  }
  ws.close();
  let duplicated = 0;
  let got = 0;
  for (const n of seen) if (n > 0) { got++; duplicated += n - 1; }
  return { frames: ORDER_FRAMES, received, lost: ORDER_FRAMES - got, duplicated, reordered, altered };
}

// ---- part 3: a replica killed mid-utterance ----

interface KillResult { ms: number; code: number; reason: string }

async function startSim(port: number): Promise<Child> {
  return startChildLines(process.execPath, [...TSX, 'bench/sim/cli.ts', '--replicas', '1', '--base-port', String(port)], /^http:/, 1, { group: true, timeoutMs: 60_000 });
}

async function killTrial(gw: Target, simPort: number, sim: Child): Promise<KillResult> {
  // The gateway may still hold the previous replica down: retry the upgrade until it takes it.
  let ws: WebSocket | null = null;
  for (let i = 0; i < 200 && ws === null; i++) {
    try { ws = await open(wsUrl(gw.url, '')); } catch { await new Promise((r) => setTimeout(r, 100)); }
  }
  if (ws === null) throw new Error('no realtime connection through the gateway');
  const closed = new Promise<{ at: number; code: number; reason: string }>((r) => ws!.on('close', (code, reason) => r({ at: performance.now(), code, reason: reason.toString() })));
  const firstDelta = new Promise<void>((r) => ws!.on('message', (d: Buffer) => { if (d.includes('transcription.delta')) r(); }));
  ws.send(JSON.stringify({ type: 'session.update', model: DEFAULT_MODEL }));
  ws.send(JSON.stringify({ type: 'input_audio_buffer.commit' }));
  const pcm = randomBytes(16 * FRAME_MS * 2).toString('base64');
  const feeder = setInterval(() => ws!.send(JSON.stringify({ type: 'input_audio_buffer.append', audio: pcm })), FRAME_MS);
  await firstDelta;
  const t0 = performance.now();
  process.kill(-sim.proc.pid!, 'SIGKILL');
  const c = await closed;
  clearInterval(feeder);
  void simPort;
  return { ms: c.at - t0, code: c.code, reason: c.reason };
}

// ---- run ----

const replica = await startReplica();
const direct: { up: number[]; down: number[] } = { up: [], down: [] };
const gateway: { up: number[]; down: number[] } = { up: [], down: [] };
/** The gateway's CPU over its rounds, and the frames it relayed (both ways). */
let gatewayCpuS = 0;
let gatewayFrames = 0;
let ordering: OrderResult[] = [];
let orderS = 0;
/** The gateway's CPU over the ordering part. */
let orderCpuS = 0;
if (PARTS.has('latency') || PARTS.has('order')) {
  const gwLatency = await startGateway({ upstreams: [{ url: replica.url }], realtime: { maxConnections: 0 } });
  const gatewayPid = gwLatency.child?.proc.pid ?? 0;
  let nextId = 0;
  for (let round = 0; round < (PARTS.has('latency') ? ROUNDS : 0); round++) {
    for (const [name, base, into] of [['direct', replica.url, direct], ['gateway', gwLatency.url, gateway]] as const) {
      progress(`latency: round ${round + 1}/${ROUNDS}, ${name}, ${CONNS} connections`);
      const cpu0 = name === 'gateway' ? cpuSecondsOf(gatewayPid) : 0;
      const r = await latencyRound(base, nextId);
      if (name === 'gateway') { gatewayCpuS += cpuSecondsOf(gatewayPid) - cpu0; gatewayFrames += r.frames; }
      nextId += CONNS;
      into.up.push(...r.up);
      into.down.push(...r.down);
    }
  }
  if (PARTS.has('order')) {
    progress(`ordering: ${ORDER_CONNS} connections × ${ORDER_FRAMES} frames`);
    timing.echo = true;
    const t0 = performance.now();
    const cpu0 = cpuSecondsOf(gatewayPid);
    ordering = await Promise.all(Array.from({ length: ORDER_CONNS }, (_, i) => orderingConnection(gwLatency.url, 100_000 + i)));
    orderCpuS = cpuSecondsOf(gatewayPid) - cpu0;
    orderS = (performance.now() - t0) / 1000;
    timing.echo = false;
  }
  await gwLatency.child?.stop();
}

const kills: KillResult[] = [];
if (PARTS.has('kill')) {
  const simPort = await freePort();
  let sim = await startSim(simPort);
  const gwKill = await startGateway({ upstreams: [{ url: `http://127.0.0.1:${simPort}` }], health: { probeIntervalMs: 200, healthyThreshold: 1 } });
  for (let i = 0; i < KILLS; i++) {
    progress(`kill: ${i + 1}/${KILLS}`);
    kills.push(await killTrial(gwKill, simPort, sim));
    sim = await startSim(simPort);
  }
  await sim.stop();
  await gwKill.child?.stop();
}
replica.server.closeAllConnections();
replica.server.close();
progress('');

const p = (xs: number[]) => percentiles(xs);
const rows: [string, Percentiles, Percentiles][] = [
  ['client → replica (audio frames)', p(direct.up), p(gateway.up)],
  ['replica → client (transcription.delta)', p(direct.down), p(gateway.down)],
];
const total = ordering.reduce((a, o) => ({ frames: a.frames + o.frames, received: a.received + o.received, lost: a.lost + o.lost, duplicated: a.duplicated + o.duplicated, reordered: a.reordered + o.reordered, altered: a.altered + o.altered }), { frames: 0, received: 0, lost: 0, duplicated: 0, reordered: 0, altered: 0 });
const flawless = ordering.filter((o) => o.received === o.frames && o.lost + o.duplicated + o.reordered + o.altered === 0).length;
const killMs = p(kills.map((k) => k.ms));
const cpuUsPerFrame = (gatewayCpuS * 1e6) / Math.max(1, gatewayFrames);
const lines = [
  `# Realtime relay (${new Date().toISOString().slice(0, 10)})`,
  '',
  `\`npm run bench:realtime\`${args.gateway ? ` (gateway ${args.gateway})` : ''}${Object.keys(GATEWAY_ENV).length ? ` (gateway env ${args['gateway-env']!.join(' ')})` : ''}${args['gateway-node-arg']!.length ? ` (node ${args['gateway-node-arg']!.join(' ')})` : ''}${args['gateway-cpus'] ? ` (gateway on CPUs ${args['gateway-cpus']}, the clients and replica on ${args['bench-cpus'] ?? 'any'})` : ''}; load average at start ${load0.toFixed(1)}.`,
  ...(PARTS.has('latency') ? [
    '',
    `${CONNS} connections × one 20 ms audio frame every 20 ms, ${ROUNDS} alternating rounds of ${ROUND_MS / 1000} s per target (first ${WARMUP_MS} ms of each not measured).`,
    '',
    '| one-way, ms | direct p50 | p99 | through warmroute p50 | p99 | added p50 | added p99 |',
    '|---|---:|---:|---:|---:|---:|---:|',
    ...rows.map(([name, d, g]) => `| ${name} (n ${d.n} / ${g.n}) | ${fmt(d.p50, 3)} | ${fmt(d.p99, 3)} | ${fmt(g.p50, 3)} | ${fmt(g.p99, 3)} | ${fmt(g.p50 - d.p50, 3)} | ${fmt(g.p99 - d.p99, 3)} |`),
    '',
    `The gateway's CPU over its rounds: ${fmt(cpuUsPerFrame, 1)} µs per frame relayed (${gatewayFrames} frames both ways, connection setup included).`,
  ] : []),
  ...(PARTS.has('order') ? [
    '',
    `Ordering: ${ORDER_CONNS} connections at once × ${ORDER_FRAMES} frames each (1 B–${ORDER_MAX} B, text and binary mixed) echoed through warmroute in ${fmt(orderS, 1)} s (the gateway's CPU ${fmt(orderCpuS, 1)} s, ${fmt((orderCpuS * 1e6) / Math.max(1, 2 * total.frames), 1)} µs per frame relayed): ${total.received} of ${total.frames} back; lost ${total.lost}, duplicated ${total.duplicated}, reordered ${total.reordered}, altered ${total.altered}; ${flawless} of ${ORDER_CONNS} connections got every frame back in order and intact.`,
  ] : []),
  ...(PARTS.has('kill') ? [
    '',
    `Replica killed mid-utterance (SIGKILL after the first transcription.delta), ${kills.length} times: the client's close came after p50 ${fmt(killMs.p50, 1)} ms, max ${fmt(Math.max(...kills.map((k) => k.ms)), 1)} ms; codes ${[...new Set(kills.map((k) => k.code))].join(', ')}; reason "${kills[0]?.reason ?? ''}".`,
  ] : []),
];
const report = lines.join('\n');
console.log(report);
mkdirSync(args.out!, { recursive: true });
writeFileSync(`${args.out}/realtime.json`, JSON.stringify({
  parts: [...PARTS], gateway: args.gateway ?? null, gatewayEnv: GATEWAY_ENV, gatewayCpus: args['gateway-cpus'] ?? null, benchCpus: args['bench-cpus'] ?? null, connections: CONNS, roundMs: ROUND_MS, rounds: ROUNDS, loadAverage: load0, gatewayCpuUsPerFrame: cpuUsPerFrame,
  latency: { direct: { up: p(direct.up), down: p(direct.down) }, gateway: { up: p(gateway.up), down: p(gateway.down) } },
  ordering: { connections: ORDER_CONNS, framesPerConnection: ORDER_FRAMES, maxBytes: ORDER_MAX, seconds: orderS, gatewayCpuS: orderCpuS, flawless, perConnection: ordering, total }, kills,
}, null, 2));
writeFileSync(`${args.out}/realtime.md`, `${report}\n`);
process.exit(0);
