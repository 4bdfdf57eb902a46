// bench:voice --batch-share F (preset `shared`): voice sessions on a fleet that also serves batch
// jobs (summaries, evaluations: long prompts, long answers, nobody on the line). Three runs on
// the same simulated fleet (vLLM's --scheduling-policy priority): no batch at all; batch with
// priority off (every request alike, first come first served); batch with priority on (the jobs
// sent as `x-priority: batch`, the gateway's queues and reserved slots, the class passed to vLLM,
// and limits.batchPrefillPerReplica: once per value asked for). The voice agents' system prompts
// (one per agent, shared by its sessions) are warmed on every replica before each run, as a deploy
// does, so a session's first turn is not a cold prefill that no gateway setting could change.
// Reported: voice TTFT p50/p90/p99 and turns over budget, batch jobs completed and per second.

import { call } from '../lib/http.js';
import { fmt, percentiles, type Percentiles } from '../lib/percentiles.js';
import { startChildLines, TSX } from '../lib/procs.js';
import { keepAliveAgent, messagesOfTokens, streamRequest } from '../sim/index.js';
import { startGateway } from './fleet.js';
import { startPriorityFleet } from './shared-vllm.js';

export interface SharedOptions {
  replicas: number;
  sessions: number;
  turns: number;
  /** Share of the clients that are batch workers (closed loop, one job after another). */
  batchShare: number;
  batchPromptTokens: [number, number];
  batchOutputTokens: [number, number];
  /**
   * Batch requests sent with vLLM's `ignore_eos`, so each answer is its drawn length. Without it
   * the simulator ends an answer at its natural length (its --output-tokens, the voice range).
   */
  batchIgnoreEos: boolean;
  systemTokens: [number, number];
  userTokens: [number, number];
  outputTokens: [number, number];
  thinkMs: [number, number];
  budgetMs: number;
  /** Slots per replica at the gateway (limits.maxInflightPerReplica): where its queue orders. */
  slotsPerReplica: number;
  /** limits.batchPrefillPerReplica for the priority-on run, one run per value; the first is the verdict's. */
  batchPrefill: number[];
  /** The replicas' --long-prefill-token-threshold (0: vLLM's default, none). */
  longPrefill: number;
  /** Simulated replicas, or real vLLM (CPU) ones started for the run (shared-vllm.ts). */
  fleet: 'sim' | 'vllm';
  /** Voice agents: each has one system prompt, shared by its sessions (session i is agent i mod agents). */
  agents: number;
  /** Every agent's system prompt sent to every replica before each run, not counted (a deploy's warmup). */
  warmup: boolean;
  maxDurationS: number;
  seed: number;
}

export const SHARED_DEFAULTS: SharedOptions = {
  replicas: 2, sessions: 16, turns: 6, batchShare: 0.5, batchPromptTokens: [3000, 6000], batchOutputTokens: [100, 300], batchIgnoreEos: false,
  systemTokens: [1000, 1500], userTokens: [20, 60], outputTokens: [30, 80], thinkMs: [300, 800], budgetMs: 300,
  slotsPerReplica: 12, batchPrefill: [1], longPrefill: 0, fleet: 'sim', agents: 4, warmup: true, maxDurationS: 120, seed: 1,
};

export type SharedMode = 'no batch' | 'batch, priority off' | 'batch, priority on';
export const SHARED_MODES: readonly SharedMode[] = ['no batch', 'batch, priority off', 'batch, priority on'];

export interface SharedRun {
  mode: SharedMode;
  /** limits.batchPrefillPerReplica of the run (0: no bound; always 0 with priority off). */
  batchPrefill: number;
  voice: Percentiles;
  voiceErrors: number;
  turnsOverBudget: number;
  turns: number;
  batchJobs: number;
  batchErrors: number;
  batchPerS: number;
  durationS: number;
  /** The fleet audit's flags, as /admin/replicas had them (none on a uniform fleet). */
  configMismatch: string[];
}

export function rng(seed: number) {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0;
    return s / 0x100000000;
  };
}
export const pick = (r: () => number, [a, b]: readonly [number, number]) => a + Math.floor(r() * (b - a + 1));
const sleep = (ms: number) => new Promise((res) => setTimeout(res, ms));

export const textOf = (tokens: number, nonce: string) => String(messagesOfTokens(tokens, nonce)[0].content);

/** Agent a's system prompt: its length drawn once per agent, its text the agent's own. */
export function systemPrompts(o: SharedOptions): string[] {
  const r = rng(o.seed * 7919 + 1);
  return Array.from({ length: o.agents }, (_, a) => textOf(pick(r, o.systemTokens), `agent ${a}.`));
}

/** Every agent's prompt on every replica, one request each (max_tokens 1), straight to the replicas. */
async function warmAgents(urls: readonly string[], systems: readonly string[], model: string | null): Promise<void> {
  const agent = keepAliveAgent();
  try {
    await Promise.all(urls.map(async (url) => {
      for (const system of systems) {
        const body = { ...(model === null ? {} : { model }), stream: true, messages: [{ role: 'system', content: system }, { role: 'user', content: 'hi' }], max_tokens: 1 };
        const res = await streamRequest(url, '/v1/chat/completions', body, agent, {});
        if (res.status !== 200) throw new Error(`warmup of ${url}: HTTP ${res.status}`);
      }
    }));
  } finally {
    agent.destroy();
  }
}

async function oneRun(urls: string[], model: string | null, mode: SharedMode, batchPrefill: number, o: SharedOptions): Promise<SharedRun> {
  const on = mode === 'batch, priority on';
  const systems = systemPrompts(o);
  const named = model === null ? {} : { model };
  if (o.warmup) await warmAgents(urls, systems, model);
  const gw = await startGateway(urls, 'affinity', [], null, {
    limits: { maxInflightPerReplica: o.slotsPerReplica, maxQueuedPerReplica: 256, batchPrefillPerReplica: on ? batchPrefill : 0 },
    priority: { vllm: { enabled: on } },
    tools: { minMaxTokens: 0 },
  });
  const agent = keepAliveAgent();
  const r = rng(o.seed);
  const ttfts: number[] = [];
  let voiceErrors = 0;
  let over = 0;
  let batchJobs = 0;
  let batchErrors = 0;
  const t0 = performance.now();
  const deadline = t0 + o.maxDurationS * 1000;
  let voiceDone = false;
  try {
    const sessions = Array.from({ length: o.sessions }, async (_, i) => {
      const sr = rng(o.seed * 1000 + i);
      await sleep(pick(sr, [0, 2000]));
      const system = systems[i % o.agents];
      const messages: { role: string; content: string }[] = [{ role: 'system', content: system }];
      for (let t = 0; t < o.turns && performance.now() < deadline; t++) {
        messages.push({ role: 'user', content: textOf(pick(sr, o.userTokens) + 8, `s${i}t${t}.`) });
        const body = { ...named, stream: true, stream_options: { include_usage: true }, messages, max_tokens: pick(sr, o.outputTokens) };
        const res = await streamRequest(gw.url, '/v1/chat/completions', body, agent, { 'x-session-id': `caller-${i}` }).catch(() => null);
        if (res === null || res.status !== 200 || res.ttftMs === null) voiceErrors++;
        else {
          ttfts.push(res.ttftMs);
          if (res.ttftMs > o.budgetMs) over++;
          messages.push({ role: 'assistant', content: res.content });
        }
        await sleep(pick(sr, o.thinkMs));
      }
    });
    const workers = mode === 'no batch' ? 0 : Math.round((o.sessions * o.batchShare) / (1 - o.batchShare));
    const batch = Array.from({ length: workers }, async (_, w) => {
      for (let j = 0; !voiceDone && performance.now() < deadline; j++) {
        const body = { ...named, messages: messagesOfTokens(pick(r, o.batchPromptTokens), `job ${w}.${j}.`), max_tokens: pick(r, o.batchOutputTokens), ...(o.batchIgnoreEos ? { ignore_eos: true } : {}) };
        const res = await streamRequest(gw.url, '/v1/chat/completions', { stream: true, ...body }, agent, on ? { 'x-priority': 'batch' } : {}).catch(() => null);
        if (res !== null && res.status === 200 && res.done) batchJobs++;
        else {
          batchErrors++;
          await sleep(200);
        }
      }
    });
    await Promise.all(sessions);
    voiceDone = true;
    const durationS = (performance.now() - t0) / 1000;
    // Jobs that finish after the voice sessions are not counted: the rate is over the voice run.
    const jobsAtEnd = batchJobs;
    await Promise.all(batch);
    const admin = (await (await call(`${gw.adminUrl}/admin/replicas`)).json()) as { replicas: { name: string; configMismatch?: { setting: string }[] }[] };
    const configMismatch = admin.replicas.flatMap((x) => (x.configMismatch ?? []).map((m) => `${x.name}: ${m.setting}`));
    return {
      mode, batchPrefill: on ? batchPrefill : 0, voice: percentiles(ttfts), voiceErrors, turnsOverBudget: over, turns: ttfts.length + voiceErrors,
      batchJobs: jobsAtEnd, batchErrors, batchPerS: jobsAtEnd / durationS, durationS, configMismatch,
    };
  } finally {
    agent.destroy();
    await gw.stop();
  }
}

/** The three runs (priority on once per batchPrefill value), each on a freshly reset fleet. */
export async function runShared(o: SharedOptions, log: (line: string) => void = () => {}): Promise<SharedRun[]> {
  const fleet = o.fleet === 'vllm' ? await startPriorityFleet(o.replicas, o.longPrefill) : await startSimFleet(o);
  const runs: SharedRun[] = [];
  try {
    for (const mode of SHARED_MODES) {
      for (const k of mode === 'batch, priority on' ? o.batchPrefill : [0]) {
        await fleet.reset();
        log(`shared fleet: ${mode}${mode === 'batch, priority on' ? `, batch prefill ${k || 'unbounded'}` : ''} ...`);
        runs.push(await oneRun(fleet.urls, fleet.model, mode, k, o));
      }
    }
  } finally {
    await fleet.stop();
  }
  return runs;
}

async function startSimFleet(o: SharedOptions) {
  const args = [...TSX, 'bench/sim/cli.ts', '--replicas', String(o.replicas), '--output-tokens', `${o.outputTokens[0]}-${o.outputTokens[1]}`, '--scheduling-policy', 'priority', '--long-prefill-token-threshold', String(o.longPrefill)];
  const fleet = await startChildLines(process.execPath, args, /^http:\/\//, o.replicas, { timeoutMs: 30_000, group: true });
  const urls = fleet.lines.map((l) => l.trim());
  return {
    urls,
    model: null,
    reset: async () => { await Promise.all(urls.map(async (u) => (await call(`${u}/sim/reset`, { method: 'POST' })).arrayBuffer())); },
    stop: () => fleet.stop(),
  };
}

export interface SharedVerdict { voiceP90Ratio: number; batchRatio: number; met: boolean }

/** The goal: priority on (its first run) keeps voice p90 within 1.2× of no batch, and batch at ≥ 80% of its rate with priority off. */
export function sharedVerdict(runs: readonly SharedRun[]): SharedVerdict {
  const [none, off, on] = SHARED_MODES.map((m) => runs.find((x) => x.mode === m)!);
  const voiceP90Ratio = on.voice.p90 / none.voice.p90;
  const batchRatio = off.batchPerS > 0 ? on.batchPerS / off.batchPerS : NaN;
  return { voiceP90Ratio, batchRatio, met: voiceP90Ratio <= 1.2 && batchRatio >= 0.8 };
}

export function sharedTable(runs: readonly SharedRun[], o: SharedOptions): string {
  const row = (c: (string | number)[]) => `| ${c.join(' | ')} |`;
  const lines = [
    row(['run', 'batch prefill per replica', 'voice TTFT p50 ms', 'p90', 'p99', `turns > ${o.budgetMs} ms`, 'voice errors', 'batch jobs', 'batch jobs/s', 'batch errors']),
    row(['---', '---:', '---:', '---:', '---:', '---:', '---:', '---:', '---:', '---:']),
    ...runs.map((x) => row([x.mode, x.mode !== 'batch, priority on' ? '—' : x.batchPrefill === 0 ? 'unbounded' : x.batchPrefill, fmt(x.voice.p50, 1), fmt(x.voice.p90, 1), fmt(x.voice.p99, 1), `${x.turnsOverBudget} / ${x.turns}`, x.voiceErrors, x.batchJobs, fmt(x.batchPerS, 2), x.batchErrors])),
  ];
  const v = sharedVerdict(runs);
  const flags = [...new Set(runs.flatMap((x) => x.configMismatch))];
  lines.push('', `Goal (priority on: voice p90 ≤ 1.2× no batch, batch ≥ 80% of priority off): voice p90 ${fmt(v.voiceP90Ratio)}×, batch ${fmt(v.batchRatio * 100, 0)}% — ${v.met ? 'met' : 'NOT met'}`);
  lines.push(`Fleet configuration audit: ${flags.length === 0 ? 'every replica configured alike' : flags.join(', ')}`);
  return lines.join('\n');
}
