// The faults of the fault suite, each a function that sets up replicas and a gateway on loopback,
// sends requests through the fault, and tallies how each request ended (client.ts). `size`
// scales counts and durations: `short` for `npm test`, `full` for `npm run chaos`.

import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Agent, request } from 'undici';
import { DEFAULT_MODEL, startReplica, type SimReplica, type SimReplicaOptions } from '../sim/index.js';
import { startFixture, type FixtureUpstream } from '../../test/helpers/fixture-upstream.js';
import { startGateway, type TestGateway } from '../../test/helpers/gateway.js';
import { rawResponse, startRawReplica } from '../../test/helpers/raw-replica.js';
import { spawnGateway, type SpawnedGateway } from '../../test/helpers/spawn-gateway.js';
import { startRedis } from '../../test/store/redis-server.js';
import { waitFor } from '../../test/helpers/wait.js';
import { send, tally, type Ended, type Tally } from './client.js';

export type Size = 'short' | 'full';

export interface Row extends Tally {
  fault: string;
  /** What else was measured (memory, pauses), for the report. */
  measured?: string;
  /** The same, as numbers a test can check. */
  figures?: Record<string, number>;
}

/** Fast simulator timing: these scenarios are about behaviour, not latency. */
const FAST: SimReplicaOptions = { frontendMs: 0.5, tokenizeMsPerToken: 0, stepBaseMs: 2, prefillMsPerToken: 0.001, attnMsPerTokenPair: 0, decodeMsPerSeq: 0, decodeMsPerCtxToken: 0, outputTokens: { min: 24, max: 24 } };

const body = (i: number, model = DEFAULT_MODEL) => JSON.stringify({
  model, stream: true, stream_options: { include_usage: true }, max_tokens: 24,
  messages: [{ role: 'system', content: 'You are a voice agent for a parcel service. Answer briefly.' }, { role: 'user', content: `Where is parcel ${i}?` }],
});

/** An in-process gateway, silent, with the test suite's fast health probes and ejections. */
function gateway(upstreams: string[], raw: Record<string, any> = {}): Promise<TestGateway> {
  return startGateway(upstreams, { ...raw, logging: { level: 'silent' } });
}

/** `total` requests, `concurrency` at a time; `during(i)` runs before request i is sent. */
async function load(url: string, total: number, concurrency: number, opts: { during?: (i: number) => Promise<void> | void; model?: string } = {}): Promise<Ended[]> {
  const out: Ended[] = [];
  let next = 0;
  const dispatcher = new Agent({ connections: concurrency });
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < total) {
      const i = next++;
      await opts.during?.(i);
      out.push(await send(url, body(i, opts.model), { headers: { 'x-session-id': `s${i % 40}` }, dispatcher }));
    }
  }));
  await dispatcher.close();
  return out;
}

const n = (size: Size, short: number, full: number) => (size === 'short' ? short : full);

/** `count` simulated replicas with FAST timing for the length of `f`. */
async function withSims<T>(count: number, f: (rs: SimReplica[]) => Promise<T>): Promise<T> {
  const rs = await Promise.all(Array.from({ length: count }, () => startReplica(FAST)));
  try {
    return await f(rs);
  } finally {
    await Promise.all(rs.map((r) => r.close()));
  }
}

/** `count` simulated replicas behind a gateway configured with `raw`; `fault` breaks some; `total` requests, 10 at a time. */
function simFault(fault: string, opts: { count: number; raw?: Record<string, any>; total: [short: number, full: number]; apply(rs: SimReplica[], size: Size): void }) {
  return (size: Size): Promise<Row> => withSims(opts.count, async (rs) => {
    const g = await gateway(rs.map((r) => r.url), opts.raw);
    try {
      opts.apply(rs, size);
      return { fault, ...tally(await load(g.url, n(size, ...opts.total), 10)) };
    } finally {
      await g.close();
    }
  });
}

export const refusesConnections = simFault('a replica refuses connections', { count: 3, total: [60, 600], apply: (rs) => rs[0].fault({ kind: 'crash' }) });
export const hangsBeforeHeaders = simFault('a replica hangs before headers', { count: 2, raw: { timeouts: { headersMs: 400 } }, total: [40, 400], apply: (rs) => rs[0].fault({ kind: 'stall' }) });
export const stallsMidStream = simFault('a replica stalls mid-stream', { count: 2, raw: { timeouts: { idleMs: 300 } }, total: [40, 400], apply: (rs, size) => rs[0].fault({ kind: 'stall-mid-stream', afterChunks: 3, times: n(size, 10, 100) }) });
export const diesMidStream = (resume: boolean) => simFault(resume ? 'a replica dies mid-stream, resume.enabled' : 'a replica dies mid-stream', { count: 2, raw: { resume: { enabled: resume } }, total: [40, 400], apply: (rs, size) => rs[0].fault({ kind: 'die-mid-stream', afterChunks: 3, times: n(size, 10, 100) }) });
export const answers503 = simFault('a replica answers 503', { count: 2, total: [40, 400], apply: (rs) => rs[0].fault({ kind: 'busy' }) });
export const allDown = simFault('all replicas down', { count: 2, total: [30, 300], apply: (rs) => { for (const r of rs) r.fault({ kind: 'crash' }); } });

export async function malformed(size: Size): Promise<Row> {
  let k = 0;
  const raw = await startRawReplica((req) => {
    // Three kinds of broken framing in turn.
    const kind = k++ % 3;
    if (kind === 0) req.socket.end('HTTP/1.1 200 OK\r\ncontent-length: 0\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n');
    else if (kind === 1) req.socket.end(rawResponse(200, [['content-type', 'application/json'], ['content-length', '100']], '{"short":'));
    else req.socket.end('HTTP/1.1 2OO OK\r\n\r\n');
  });
  const g = await gateway([raw.url], { health: { probeIntervalMs: 60_000 } });
  try {
    return { fault: 'malformed replica responses', ...tally(await load(g.url, n(size, 30, 300), 5, { model: 'fixture-model' })) };
  } finally {
    await g.close();
    await raw.close();
  }
}

export async function redisRestart(size: Size): Promise<Row> {
  const redis = await startRedis();
  try {
    return await withSims(2, async (rs) => {
      const g = await gateway(rs.map((r) => r.url), { redis: { url: redis.url } });
      try {
        const total = n(size, 90, 900);
        const results = await load(g.url, total, 10, {
          during: async (i) => {
            if (i === Math.floor(total / 3)) await redis.kill();
            if (i === Math.floor((2 * total) / 3)) await redis.restart();
          },
        });
        return { fault: 'Redis killed and restarted under load', ...tally(results) };
      } finally { await g.close(); }
    });
  } finally {
    await redis.kill();
  }
}

/**
 * A gateway in a process of its own (test/helpers/spawn-gateway.ts: stop() is SIGTERM, then
 * SIGKILL after 10 s), SIGKILLed too if this process exits first.
 */
async function spawned(upstreams: string[]): Promise<SpawnedGateway & { rssMb(): number; hwmMb(): number }> {
  const g = await spawnGateway(upstreams);
  const kill = () => g.child.kill('SIGKILL');
  process.once('exit', kill);
  g.child.once('exit', () => process.off('exit', kill));
  return { ...g, rssMb: () => g.memory().rssKb / 1024, hwmMb: () => g.memory().hwmKb / 1024 };
}

/** Its exit code once it has exited by itself; after `ms`, stop() (its SIGKILL) and null: never a hang. */
async function exitCodeWithin(g: SpawnedGateway, ms: number): Promise<number | null> {
  const running = g.child.exitCode === null && g.child.signalCode === null;
  if (running && !(await once(g.child, 'exit', { signal: AbortSignal.timeout(ms) }).then(() => true, () => false))) {
    await g.stop();
    return null;
  }
  return g.child.exitCode;
}

export async function sigterm(size: Size): Promise<Row> {
  const up = await startFixture('sigterm');
  const g = await spawned([up.url]);
  try {
    const streams = n(size, 20, 50);
    const dispatcher = new Agent({ connections: streams });
    // Every stream is held at the replica after its first event until the drain has begun: each is
    // live when the signal comes, however long a slow machine takes to open them all (a request
    // still on its way when the listener closes would be refused, and say nothing of the drain).
    const live = Array.from({ length: streams }, (_, i) => send(g.url, body(i, 'fixture-model'), { headers: { 'x-session-id': `t${i}`, 'x-fixture-chunks': '10', 'x-fixture-gap-ms': '50', 'x-fixture-hold': 'sigterm' }, dispatcher }));
    await waitFor(`${streams} streams at the replica`, () => up.seen.filter((r) => r.url === '/v1/chat/completions').length === streams, 30_000);
    // One SIGTERM only: the gateway drains on the first and a second would kill it outright.
    g.child.kill('SIGTERM');
    await waitFor('the gateway to start draining', async () => ((await (await request(`${g.adminUrl}/readyz`)).body.json()) as { draining: boolean }).draining, 15_000);
    up.release('sigterm');
    const results = await Promise.all(live);
    const code = await exitCodeWithin(g, 15_000);
    await dispatcher.close();
    return { fault: `SIGTERM with ${streams} live streams`, ...tally(results), figures: { exitCode: code ?? NaN }, measured: code === null ? 'no exit within 15 s of SIGTERM: SIGKILLed' : `exit code ${code}` };
  } finally {
    await g.stop();
    await up.close();
  }
}

/** An SSE replica that writes `mb` MiB of events as fast as its socket takes them, and counts them. */
async function firehose(mb: number): Promise<{ url: string; written(): number; close(): Promise<void> }> {
  let written = 0;
  const event = `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: 'x'.repeat(900) } }] })}\n\n`;
  const server: Server = createServer((req, res) => {
    if (req.url === '/health' || req.url === '/metrics') return void res.end();
    if (req.url === '/v1/models') return void res.end('{"object":"list","data":[{"id":"sim"}]}');
    req.resume();
    if (req.url !== '/v1/chat/completions') return void res.writeHead(404).end();
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const total = mb * 1024 * 1024;
    const pump = () => {
      while (written < total) {
        written += event.length;
        if (!res.write(event)) return void res.once('drain', pump);
      }
      res.end('data: [DONE]\n\n');
    };
    pump();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, written: () => written, close: () => new Promise((r) => { server.closeAllConnections(); server.close(() => r()); }) };
}

export async function slowReader(size: Size): Promise<Row> {
  const mb = n(size, 30, 50);
  const hose = await firehose(mb);
  const g = await spawned([hose.url]);
  try {
    const before = g.rssMb();
    // The client reads its first chunk, then nothing for 3 s, then the rest as fast as it can.
    const t0 = Date.now();
    let paused = 0;
    let pausedWritten = 0;
    const reader = send(g.url, body(0, 'sim'), { pauseAfterFirstMs: 3000, deadlineMs: 120_000 });
    await new Promise((r) => setTimeout(r, 2900));
    // What the replica got to write, and what the gateway holds, while the client read nothing.
    pausedWritten = hose.written();
    paused = g.rssMb() - before;
    const result = await reader;
    const peak = g.hwmMb() - before;
    return {
      figures: { pausedWrittenMb: pausedWritten / 1048576, pausedRssMb: paused, peakRssMb: peak },
      fault: `a slow reader of a ${mb} MB stream`,
      ...tally([result]),
      measured: `while the client read nothing for 3 s the replica could write ${(pausedWritten / 1048576).toFixed(1)} MB and the gateway's RSS grew ${paused.toFixed(0)} MB; peak +${peak.toFixed(0)} MB, ${((Date.now() - t0) / 1000).toFixed(1)} s`,
    };
  } finally {
    await g.stop();
    await hose.close();
  }
}

export async function manyStreams(size: Size): Promise<Row> {
  const up: FixtureUpstream = await startFixture('many');
  const g = await spawned([up.url]);
  try {
    const streams = n(size, 200, 1000);
    const seconds = n(size, 3, 30);
    const before = g.rssMb();
    const dispatcher = new Agent({ connections: streams });
    const results = await Promise.all(Array.from({ length: streams }, (_, i) => send(g.url, body(i, 'fixture-model'), {
      headers: { 'x-session-id': `m${i}`, 'x-fixture-chunks': String(seconds * 2), 'x-fixture-gap-ms': '500' }, dispatcher, deadlineMs: (seconds + 60) * 1000,
    })));
    await dispatcher.close();
    const peak = g.hwmMb() - before;
    await new Promise((r) => setTimeout(r, 1000));
    return { figures: { beforeMb: before, peakMb: peak, afterMb: g.rssMb() }, fault: `${streams} concurrent streams held ${seconds} s`, ...tally(results), measured: `gateway RSS ${before.toFixed(0)} MB before, peak +${peak.toFixed(0)} MB, ${g.rssMb().toFixed(0)} MB after` };
  } finally {
    await g.stop();
    await up.close();
  }
}

/** Every fault of the suite, by a short name. */
export const SCENARIOS = {
  refused: refusesConnections,
  'hang-before-headers': hangsBeforeHeaders,
  'stall-mid-stream': stallsMidStream,
  'die-mid-stream': diesMidStream(false),
  'die-mid-stream-resumed': diesMidStream(true),
  '503': answers503,
  'all-down': allDown,
  malformed,
  redis: redisRestart,
  sigterm,
  'slow-reader': slowReader,
  'many-streams': manyStreams,
} satisfies Record<string, (size: Size) => Promise<Row>>;

export type ScenarioName = keyof typeof SCENARIOS;

export const isScenario = (name: string): name is ScenarioName => Object.hasOwn(SCENARIOS, name);

/** What each fault must show besides zero silent losses, short run or full; throws an AssertionError saying what it missed. */
export const EXPECT: Record<ScenarioName, (r: Row) => void> = {
  refused: (r) => assert.equal(r.completed, r.sent, 'a refused connection fails over'),
  'hang-before-headers': (r) => assert.ok(r.explicit > 0 && r.notes.some((x) => x.includes('504')), `a replica that hangs before headers gives the client 504s (notes: ${r.notes.join('; ')})`),
  'stall-mid-stream': (r) => assert.ok(r.explicit > 0 && r.notes.some((x) => x.includes('error event')), `a stream stalled mid-way ends with an error event (notes: ${r.notes.join('; ')})`),
  'die-mid-stream': (r) => assert.ok(r.explicit > 0 && r.notes.some((x) => x.includes('error event')), `a stream cut mid-way ends with an error event (notes: ${r.notes.join('; ')})`),
  'die-mid-stream-resumed': (r) => assert.equal(r.completed, r.sent, 'every broken stream is resumed'),
  '503': (r) => assert.equal(r.completed, r.sent, 'a 503 before any byte is retried'),
  'all-down': (r) => assert.equal(r.explicit, r.sent, 'with every replica down, every request gets an explicit error'),
  malformed: (r) => assert.equal(r.completed, 0, 'nothing malformed is passed on as an answer'),
  redis: (r) => assert.equal(r.completed, r.sent, 'routing goes on without Redis'),
  sigterm: (r) => {
    assert.equal(r.completed, r.sent, 'live streams finish on SIGTERM');
    assert.equal(r.figures!.exitCode, 0, 'the gateway exits 0 by itself after SIGTERM');
  },
  'slow-reader': (r) => {
    assert.equal(r.completed, 1, 'the slow reader gets its whole stream');
    // A 30 MB stream to a client that reads nothing: the replica is held back by what the sockets
    // buffer, and the gateway holds next to nothing.
    assert.ok(r.figures!.pausedWrittenMb < 20, `the replica wrote ${r.figures!.pausedWrittenMb.toFixed(1)} MB to a paused client`);
    assert.ok(r.figures!.peakRssMb < 64, `gateway RSS peaked ${r.figures!.peakRssMb.toFixed(0)} MB above its start`);
  },
  'many-streams': (r) => {
    assert.equal(r.completed, r.sent, 'every concurrent stream completes');
    assert.ok(r.figures!.afterMb - r.figures!.beforeMb < 64, `memory comes back after the streams end (${r.figures!.beforeMb.toFixed(0)} MB before, ${r.figures!.afterMb.toFixed(0)} MB after)`);
  },
};

/**
 * Throws an AssertionError naming what the row missed: no request may end without the client
 * knowing (completed, or an explicit error it can act on), and the fault's own EXPECT.
 */
export function checkRow(name: ScenarioName, row: Row): void {
  assert.equal(row.silent, 0, `${row.fault}: ${row.silent} silent losses (${row.notes.join('; ')})`);
  assert.equal(row.completed + row.explicit, row.sent, `${row.fault}: ${row.sent} sent, ${row.completed} completed + ${row.explicit} explicit`);
  EXPECT[name](row);
}

export function tableOf(rows: readonly Row[]): string {
  const lines = ['| fault | sent | completed | explicit errors | silent losses | measured |', '|---|---:|---:|---:|---:|---|'];
  for (const r of rows) lines.push(`| ${r.fault} | ${r.sent} | ${r.completed} | ${r.explicit} | ${r.silent} | ${[r.measured, ...r.notes].filter(Boolean).join('; ')} |`);
  return lines.join('\n');
}
