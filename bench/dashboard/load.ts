// The traffic the dashboard is drawn from: the voice benchmark's sessions (keyed and keyless,
// history growing every turn, tool turns, think time) through the gateway for about a minute, plus
// the trouble a dashboard exists for — a replica answering 503, one cutting streams, one crashing
// and coming back cold — two sessions that change their own prompt (prefix drift), and a burst of
// batch jobs (x-priority: batch) beside the callers, for the interactive vs batch panels.

import { call } from '../lib/http.js';
import { keepAliveAgent, streamChatExchange } from '../voice/client.js';
import { MAX_TOKENS, MODEL } from '../voice/conversation.js';
import { runStrategy, type StrategyRun } from '../voice/run.js';
import { buildWorkload, type WorkloadOptions } from '../voice/workload.js';

export const LOAD_S = 60;

// Enough sessions to keep 4 replicas busy, arriving over the first 12 s so placements happen
// while the panels are drawing; enough turns that none runs out before the minute does.
export const WORKLOAD = { sessions: 36, turns: 40, groups: 5, keylessShare: 0.3, startSpreadMs: 12_000, thinkMs: [800, 2000], seed: 1 } satisfies Partial<WorkloadOptions>;

/** The trouble's shape, for the page's caption too. */
export const TROUBLE = { cutAfterChunks: 3, crashForS: 10, clockDriftS: [20, 50], toolDriftFromS: 40, batchS: [15, 45], batchWorkers: 4 } as const;

/** Something that happened during the load, drawn as a mark on every panel. */
export interface LoadEvent {
  atS: number;
  label: string;
  /** The replica it happened to, by the name the gateway has for it. */
  replica: string;
  detail: string;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function fault(url: string, method: 'POST' | 'DELETE', body?: object, query = ''): Promise<void> {
  await (await call(`${url}/sim/fault${query}`, { method, body: body && JSON.stringify(body), headers: { 'content-type': 'application/json' } }, 5000)).arrayBuffer();
}

/**
 * The trouble, on a timeline (s after the load starts), against the fleet's replicas 1, 2, 3. The
 * 503s and the cut streams come twice: a counter's label set that first appears mid-run enters
 * Prometheus with its first increments already counted, so rate() may show only the second bout
 * (as it would on a real dashboard).
 */
function schedule(replicas: readonly string[], names: readonly string[], events: LoadEvent[], t0: number): Promise<void>[] {
  const name = (i: number) => names[i];
  const at = async (s: number, label: string, i: number, what: string, act: () => Promise<void>) => {
    await sleep(Math.max(0, t0 + s * 1000 - performance.now()));
    await act();
    events.push({ atS: (performance.now() - t0) / 1000, label, replica: name(i), detail: `${name(i)} ${what}` });
  };
  const busy = (from: number, to: number) => [
    at(from, '503', 1, `answers 503 (queue full) until ${to} s`, () => fault(replicas[1], 'POST', { kind: 'busy' })),
    at(to, 'ok', 1, 'serves again', () => fault(replicas[1], 'DELETE', undefined, '?kind=busy')),
  ];
  const cut = (from: number, streams: number) =>
    at(from, 'cut', 2, `drops its next ${streams} streams after ${TROUBLE.cutAfterChunks} chunks`, () => fault(replicas[2], 'POST', { kind: 'die-mid-stream', afterChunks: TROUBLE.cutAfterChunks, times: streams }));
  return [
    ...busy(10, 14),
    cut(20, 4),
    ...busy(28, 34),
    cut(38, 8),
    at(44, 'crash', 3, 'crashes', () => fault(replicas[3], 'POST', { kind: 'crash', recoverAfterMs: TROUBLE.crashForS * 1000 })),
    // The simulator brings it back by itself (recoverAfterMs): only the mark is ours.
    at(44 + TROUBLE.crashForS, 'restart', 3, 'restarts with an empty cache', async () => {}),
  ];
}

/**
 * Two keyed sessions that break their own prefix: one puts the current time in its system prompt
 * for a while (drift at the system prompt every turn), one lists its tools in a new order every
 * third turn from some point on (drift at the tools). The usual agent bugs the drift panel is for.
 */
async function driftingSessions(gateway: string, t0: number, until: number): Promise<void> {
  const agent = keepAliveAgent();
  const tools = ['lookup', 'book', 'cancel'].map((n) => ({ type: 'function', function: { name: `clinic_${n}`, description: `${n} a visit`, parameters: { type: 'object', properties: {} } } }));
  const session = async (key: string, system: (s: number) => string, toolsAt: (s: number, turn: number) => unknown[]) => {
    const history: { role: string; content: string }[] = [];
    for (let turn = 0; performance.now() < until; turn++) {
      const s = (performance.now() - t0) / 1000;
      history.push({ role: 'user', content: `turn ${turn}: is there a slot on Tuesday morning for two people, please` });
      const body = { model: MODEL, messages: [{ role: 'system', content: system(s) }, ...history], tools: toolsAt(s, turn), stream: true, stream_options: { include_usage: true }, max_tokens: MAX_TOKENS };
      const x = await streamChatExchange(gateway, { 'x-session-id': key }, body, agent, 15_000);
      if (x.status === 200 && x.done && !x.error) history.push({ role: 'assistant', content: x.content });
      else history.pop();
      await sleep(1200);
    }
  };
  const base = "You are the clinic's voice agent. Keep answers short and spoken. ".repeat(40);
  try {
    await Promise.all([
      session('drift-clock', (s) => (s >= TROUBLE.clockDriftS[0] && s < TROUBLE.clockDriftS[1] ? `The time is ${new Date().toISOString()}. ${base}` : base), () => tools),
      session('drift-tools', () => base, (s, turn) => (s >= TROUBLE.toolDriftFromS && turn % 3 === 0 ? [...tools].reverse() : tools)),
    ]);
  } finally {
    agent.destroy();
  }
}

/** Closed-loop batch workers (long prompts, long answers, nobody waiting) for the batch window. */
async function batchBurst(gateway: string, t0: number, events: LoadEvent[]): Promise<void> {
  const [from, to] = TROUBLE.batchS;
  await sleep(Math.max(0, t0 + from * 1000 - performance.now()));
  events.push({ atS: (performance.now() - t0) / 1000, label: 'batch', replica: '', detail: `${TROUBLE.batchWorkers} batch workers until ${to} s` });
  const agent = keepAliveAgent();
  const until = t0 + to * 1000;
  const job = "Summarise this call transcript for the clinic's records, with every date and name. ".repeat(120);
  try {
    await Promise.all(Array.from({ length: TROUBLE.batchWorkers }, async (_, w) => {
      for (let j = 0; performance.now() < until; j++) {
        const body = { model: MODEL, messages: [{ role: 'user', content: `job ${w}.${j}: ${job}` }], stream: true, max_tokens: 120 };
        const x = await streamChatExchange(gateway, { 'x-priority': 'batch' }, body, agent, 30_000);
        if (x.status !== 200) await sleep(500);
      }
    }));
  } finally {
    agent.destroy();
  }
}

export interface LoadResult {
  run: StrategyRun;
  events: LoadEvent[];
  /** Date.now() when the load started: the scrapes' clock. */
  startedAt: number;
}

export async function driveLoad(gateway: string, replicas: readonly string[], names: readonly string[], onProgress: (line: string) => void): Promise<LoadResult> {
  const events: LoadEvent[] = [];
  const startedAt = Date.now();
  const t0 = performance.now();
  const trouble = schedule(replicas, names, events, t0);
  const drift = driftingSessions(gateway, t0, t0 + LOAD_S * 1000);
  const batch = batchBurst(gateway, t0, events);
  const run = await runStrategy({
    url: gateway, strategy: 'affinity', workload: buildWorkload(WORKLOAD),
    maxDurationMs: LOAD_S * 1000, requestTimeoutMs: 15_000,
    onProgress: (p) => onProgress(`${(p.elapsedMs / 1000).toFixed(0)} s: ${p.done} requests, ${p.inflight} in flight`),
  });
  await Promise.all([...trouble, drift, batch]);
  events.sort((a, b) => a.atS - b.atS);
  return { run, events, startedAt };
}
