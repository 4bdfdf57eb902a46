import { cpuSecondsOf } from '../lib/cpu.js';
import { Pool } from 'undici';

const FIRST = Buffer.from('word0');

/** One request the load loops send: its path and its JSON body. */
export interface BenchRequest {
  readonly path: string;
  readonly body: string;
}

/**
 * A request of about `kb` KiB. `chat`: a long byte-stable system prompt plus a short exchange.
 * `completions`: one string prompt of that size (what the fixed-size block chain hashes).
 */
export function benchBody(kb: number, route: 'chat' | 'completions' = 'chat'): BenchRequest {
  const sentence = 'You are a helpful voice agent for a public service line; answer briefly and confirm details. ';
  const text = sentence.repeat(Math.max(1, Math.round((kb * 1024) / sentence.length)));
  if (route === 'completions') {
    return { path: '/v1/completions', body: JSON.stringify({ model: 'bench', stream: true, max_tokens: 32, prompt: `${text}\nCaller: I need to report a broken street light.\nAgent:` }) };
  }
  return {
    path: '/v1/chat/completions',
    body: JSON.stringify({
      model: 'bench', stream: true, max_tokens: 32,
      messages: [
        { role: 'system', content: text },
        { role: 'user', content: 'I need to report a broken street light.' },
        { role: 'assistant', content: 'Sure. Where is it?' },
        { role: 'user', content: 'On the corner of Main and 3rd.' },
      ],
    }),
  };
}

/** Client-side TTFT in ms: request sent → first chunk holding the first content token. */
export async function ttftOnce(pool: Pool, req: BenchRequest, session: string): Promise<number> {
  const t0 = process.hrtime.bigint();
  const res = await pool.request({
    path: req.path, method: 'POST',
    headers: { 'content-type': 'application/json', 'x-session-id': session },
    body: req.body,
  });
  let ttft = -1;
  for await (const chunk of res.body) {
    if (ttft < 0 && (chunk as Buffer).indexOf(FIRST) >= 0) ttft = Number(process.hrtime.bigint() - t0) / 1e6;
  }
  if (res.statusCode !== 200 || ttft < 0) throw new Error(`bad response ${res.statusCode}`);
  return ttft;
}

/** `total` requests over `concurrency` workers, each worker its own session. */
export async function closedLoop(pool: Pool, body: BenchRequest, concurrency: number, total: number, tag: string): Promise<number[]> {
  const out: number[] = [];
  let issued = 0;
  await Promise.all(Array.from({ length: concurrency }, async (_, w) => {
    while (issued < total) {
      issued++;
      out.push(await ttftOnce(pool, body, `${tag}-${w}`));
    }
  }));
  return out;
}

/** A target under load: its connection pools and, when it is a process of ours, its pid (for CPU). */
export interface Loaded {
  name: string;
  pid?: number;
  pool1: Pool;
  pool50: Pool;
}

type Progress = (s: string) => void;
const perTarget = (ts: readonly Loaded[]) => new Map<string, number[]>(ts.map((t) => [t.name, []]));

export async function warm(ts: readonly Loaded[], body: BenchRequest, progress: Progress = () => {}): Promise<void> {
  for (const t of ts) {
    progress(`warming ${t.name}`);
    for (let i = 0; i < 200; i++) await ttftOnce(t.pool1, body, 'warm');
    await closedLoop(t.pool50, body, 50, 500, 'warm');
  }
}

/**
 * Concurrency 1, steady: blocks of `block` requests per target, the order rotated every block,
 * so drift and noise hit every target alike while each block runs on a warm target.
 */
export async function steadyBlocks(ts: readonly Loaded[], body: BenchRequest, total: number, block: number, progress: Progress = () => {}): Promise<Map<string, number[]>> {
  const out = perTarget(ts);
  for (let b = 0; b < Math.ceil(total / block); b++) {
    progress(`concurrency 1, steady: ${b * block}/${total}`);
    for (let k = 0; k < ts.length; k++) {
      const t = ts[(b + k) % ts.length];
      for (let j = 0; j < block; j++) out.get(t.name)!.push(await ttftOnce(t.pool1, body, `c1-${j % 7}`));
    }
  }
  return out;
}

/** Concurrency 1, interleaved: one request per target in turn (each finds its target idle). */
export async function interleaved(ts: readonly Loaded[], body: BenchRequest, total: number, progress: Progress = () => {}): Promise<Map<string, number[]>> {
  const out = perTarget(ts);
  for (let i = 0; i < total; i++) {
    if (i % 50 === 0) progress(`concurrency 1, interleaved: ${i}/${total}`);
    for (let k = 0; k < ts.length; k++) {
      const t = ts[(i + k) % ts.length];
      out.get(t.name)!.push(await ttftOnce(t.pool1, body, `c1-${i % 7}`));
    }
  }
  return out;
}

/**
 * Concurrency 50 in `rounds` blocks per target, the order rotated every round; also each
 * target's own CPU per request (seconds) over its blocks, when it has a pid.
 */
export async function rotatedRounds(ts: readonly Loaded[], body: BenchRequest, total: number, rounds: number, progress: Progress = () => {}): Promise<{ ttft: Map<string, number[]>; cpuPerReq: Map<string, number> }> {
  const ttft = perTarget(ts);
  const cpuPerReq = new Map<string, number>();
  const n = Math.ceil(total / rounds);
  for (let r = 0; r < rounds; r++) {
    for (let k = 0; k < ts.length; k++) {
      const t = ts[(r + k) % ts.length];
      progress(`concurrency 50: round ${r + 1}/${rounds}, ${t.name}`);
      const cpu0 = t.pid ? cpuSecondsOf(t.pid) : 0;
      ttft.get(t.name)!.push(...(await closedLoop(t.pool50, body, 50, n, `c50-${r}`)));
      if (t.pid) cpuPerReq.set(t.name, (cpuPerReq.get(t.name) ?? 0) + (cpuSecondsOf(t.pid) - cpu0) / (n * rounds));
    }
  }
  return { ttft, cpuPerReq };
}

export function loaded(t: { name: string; url: string; child?: { proc: { pid?: number } } }): Loaded {
  return { name: t.name, pid: t.child?.proc.pid, pool1: new Pool(t.url, { connections: 1 }), pool50: new Pool(t.url, { connections: 50 }) };
}

export async function closePools(ts: readonly Loaded[]): Promise<void> {
  for (const t of ts) {
    await t.pool1.close();
    await t.pool50.close();
  }
}
