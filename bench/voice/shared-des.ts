// The shared-fleet workload (shared.ts) in virtual time: the same voice sessions and batch workers,
// the same prompts and seeds, against the simulator's engine and block pool (the scale run's virtual
// replica, bench/scale/des/replica.ts) on its virtual clock, behind the gateway's own per-replica limiter
// (src/queue/limiter.ts: slots, reserved interactive slots, class order, the batch prefill bound).
// No sockets, no gateway process, no machine load: a run of minutes takes a second, and the same
// seed gives the same figures, so a frontier of settings can be swept on several seeds.
//
// What is modelled, not run: the gateway's own time and the network (a constant `gatewayMs` each
// way in front of the replica); placement (a session stays on the replica it first went to, the one
// with the fewest sessions; a batch job goes to the replica with the fewest requests open or queued
// at the gateway: what the router does for keyless prompts no replica has seen); the queue timeout
// (timeouts.queueMs is real time in the limiter, so a batch request here waits as long as it must
// rather than being refused after 10 s).

import { createLimiter, type Limiter, type Prefill, type QueuePlace } from '../../src/queue/limiter.js';
import { reservedSlots } from '../../src/queue/admission.js';
import { percentiles } from '../lib/percentiles.js';
import type { SimReplicaOptions } from '../sim/config.js';
import { createVirtualClock } from '../scale/des/clock.js';
import { createVirtualReplica, type VirtualAnswer } from '../scale/des/replica.js';
import { messagesOfTokens } from '../sim/index.js';
import { pick, rng, systemPrompts, textOf, type SharedMode, type SharedOptions, type SharedRun } from './shared.js';

/** The gateway settings a point of the frontier varies (the rest are shared.ts's). */
export interface GatewayKnobs {
  /** limits.batchPrefillPerReplica with priority on (0: no bound). */
  batchPrefill: number;
  /** The bound's hold of new batch prefills while a caller awaits its first token. */
  holdForInteractive: boolean;
  /** limits.reservedInteractiveShare. */
  reservedShare: number;
  /**
   * Not built in the gateway; modelled here to bound what one could do: when a caller's turn is
   * sent to a replica, every batch request there still awaiting its first token is aborted and
   * sent again once no caller awaits a first token there (its computed blocks stay in the prefix
   * cache, so the resend continues where it was cut).
   */
  preemptBatch?: boolean;
}

export interface DesSharedOptions extends SharedOptions {
  gateway: GatewayKnobs;
  /** Replica settings beyond shared.ts's (the simulator's knobs: timing, capacity, asyncScheduling). */
  replica: SimReplicaOptions;
  gatewayMs: number;
  /**
   * Where a batch job goes: the replica with the fewest requests open or queued (`least`), one at
   * random, or the fewest as last seen by a scrape every second (`stale`: jobs between scrapes herd).
   */
  batchPlacement?: 'least' | 'random' | 'stale';
}

// The discrete-event run's virtual clock (bench/scale/des/clock.ts), run with an await after each
// timer, so the limiter's admissions (promises it resolves inside a release) continue at the
// virtual instant they were made, before the next timer.
function createClock() {
  const clock = createVirtualClock();
  return Object.assign(clock, {
    async runAwaiting(untilMs: number): Promise<void> {
      while (clock.step(untilMs)) await null;
    },
  });
}

/** A replica of the shared fleet: the scale run's virtual replica at priority scheduling and this run's threshold. */
const createReplica = (clock: ReturnType<typeof createClock>, index: number, o: DesSharedOptions) =>
  createVirtualReplica(clock, index, { outputTokens: { min: o.outputTokens[0], max: o.outputTokens[1] }, schedulingPolicy: 'priority', longPrefillTokenThreshold: o.longPrefill, ...o.replica });

type Answer = VirtualAnswer;

const VOICE: QueuePlace = { batch: false, deadline: Infinity, budgetMs: 0, expireAtDeadline: false };
const BATCH: QueuePlace = { batch: true, deadline: Infinity, budgetMs: 0, expireAtDeadline: false };

/** One of shared.ts's three runs (priority on with `o.gateway`), in virtual time. */
export async function runSharedDes(mode: SharedMode, o: DesSharedOptions): Promise<SharedRun & { preemptions: number }> {
  const on = mode === 'batch, priority on';
  const clock = createClock();
  const replicas = Array.from({ length: o.replicas }, (_, i) => createReplica(clock, i, o));
  const K = on ? o.gateway.batchPrefill : 0;
  // Queue waits here are virtual; the limiter's own timeout timer is real time, so it is set past any run.
  const limiters: Limiter[] = replicas.map((_, i) => createLimiter({
    max: o.slotsPerReplica, maxQueued: 256, timeoutMs: 2 ** 31 - 1, what: `replica ${i}`,
    reserved: reservedSlots(o.slotsPerReplica, o.gateway.reservedShare), batchPrefill: K, holdForInteractive: o.gateway.holdForInteractive,
  }));
  const load = replicas.map(() => 0);
  // preemptBatch: per replica, the batch requests awaiting their first token (each can be cut),
  // the callers awaiting theirs, and the cut requests waiting to be sent again.
  const cut = replicas.map(() => new Set<{ abort(): void }>());
  const callers = replicas.map(() => 0);
  const resume = replicas.map((): (() => void)[] => []);
  let preemptions = 0;
  const sleep = (ms: number) => new Promise<void>((res) => clock.setTimeout(res, ms));

  /** Through the gateway to replica `i`: its limiter, then the replica; resolves when the answer is complete. */
  async function send(i: number, body: Record<string, unknown>, place: QueuePlace, prefill: Prefill): Promise<Answer> {
    await sleep(o.gatewayMs);
    load[i]++;
    const wait = limiters[i].acquire(place, prefill);
    if (wait !== null) await wait;
    let a: Answer | null = null;
    while (a === null) {
      if (o.gateway.preemptBatch && prefill === 'batch' && callers[i] > 0) await new Promise<void>((res) => resume[i].push(res));
      a = await new Promise<Answer | null>((res) => {
        const entry = { abort: () => { if (h.abort()) { cut[i].delete(entry); preemptions++; res(null); } } };
        const h = replicas[i].serve(body, res, () => { cut[i].delete(entry); limiters[i].prefilled(prefill); });
        if (prefill === 'batch') cut[i].add(entry);
      });
    }
    limiters[i].release();
    load[i]--;
    await sleep(o.gatewayMs);
    return a;
  }

  const systems = systemPrompts(o);
  const ttfts: number[] = [];
  let over = 0;
  let batchJobs = 0;
  let voiceDone = false;
  const pinned = replicas.map(() => 0);
  const withPriority = (body: Record<string, unknown>, p: number) => (on ? { ...body, priority: p } : body);

  const main = (async () => {
    // A deploy's warmup: every agent's prompt on every replica, straight to the replicas.
    await Promise.all(replicas.map(async (rep) => {
      for (const system of systems) {
        await new Promise<void>((res) => rep.serve({ stream: true, messages: [{ role: 'system', content: system }, { role: 'user', content: 'hi' }], max_tokens: 1 }, () => res()));
      }
    }));
    const t0 = clock.now();
    const deadline = t0 + o.maxDurationS * 1000;
    const r = rng(o.seed);
    const placeRng = rng(o.seed * 31 + 7);
    let scraped = [...load];
    const scrape = () => { scraped = [...load]; if (!voiceDone) clock.setTimeout(scrape, 1000); };
    if (o.batchPlacement === 'stale') scrape();
    const sessions = Array.from({ length: o.sessions }, async (_, i) => {
      const sr = rng(o.seed * 1000 + i);
      await sleep(pick(sr, [0, 2000]));
      let at = -1;
      const messages: { role: string; content: string }[] = [{ role: 'system', content: systems[i % o.agents] }];
      for (let t = 0; t < o.turns && clock.now() < deadline; t++) {
        messages.push({ role: 'user', content: textOf(pick(sr, o.userTokens) + 8, `s${i}t${t}.`) });
        const body = withPriority({ stream: true, messages: [...messages], max_tokens: pick(sr, o.outputTokens) }, 0);
        if (at < 0) {
          at = pinned.indexOf(Math.min(...pinned));
          pinned[at]++;
        }
        const sent = clock.now();
        let first = -1;
        await sleep(o.gatewayMs);
        const wait = limiters[at].acquire(VOICE, 'interactive');
        load[at]++;
        if (wait !== null) await wait;
        callers[at]++;
        if (o.gateway.preemptBatch && on) for (const e of [...cut[at]]) e.abort();
        const a = await new Promise<Answer>((res) => replicas[at].serve(body, res, () => {
          first = clock.now() + o.gatewayMs;
          limiters[at].prefilled('interactive');
          if (--callers[at] === 0) for (const go of resume[at].splice(0)) go();
        }));
        limiters[at].release();
        load[at]--;
        const ttft = first - sent;
        ttfts.push(ttft);
        if (ttft > o.budgetMs) over++;
        messages.push({ role: 'assistant', content: a.content });
        await sleep(o.gatewayMs + pick(sr, o.thinkMs));
      }
    });
    const workers = mode === 'no batch' ? 0 : Math.round((o.sessions * o.batchShare) / (1 - o.batchShare));
    const batch = Array.from({ length: workers }, async (_, w) => {
      for (let j = 0; !voiceDone && clock.now() < deadline; j++) {
        const body = withPriority({ stream: true, messages: messagesOfTokens(pick(r, o.batchPromptTokens), `job ${w}.${j}.`), max_tokens: pick(r, o.batchOutputTokens), ...(o.batchIgnoreEos ? { ignore_eos: true } : {}) }, 10);
        const seen = o.batchPlacement === 'stale' ? scraped : load;
        const i = o.batchPlacement === 'random' ? Math.floor(placeRng() * replicas.length) : seen.indexOf(Math.min(...seen));
        await send(i, body, on ? BATCH : VOICE, on ? 'batch' : 'interactive');
        batchJobs++;
      }
    });
    await Promise.all(sessions);
    voiceDone = true;
    const durationS = (clock.now() - t0) / 1000;
    const jobsAtEnd = batchJobs;
    await Promise.all(batch);
    return { durationS, jobsAtEnd };
  })();
  let finished = false;
  void main.finally(() => { finished = true; });
  while (!finished) {
    await clock.runAwaiting(Infinity);
    for (let k = 0; k < 16 && !finished && clock.pending() === 0; k++) await null;
    // Nothing is scheduled and the run has not ended: a request lost its wake-up.
    if (!finished && clock.pending() === 0) throw new Error(`shared DES stalled at ${clock.now().toFixed(0)} virtual ms`);
  }
  const { durationS, jobsAtEnd } = await main;
  return {
    mode, batchPrefill: K, voice: percentiles(ttfts), voiceErrors: 0, turnsOverBudget: over, turns: ttfts.length,
    batchJobs: jobsAtEnd, batchErrors: 0, batchPerS: jobsAtEnd / durationS, durationS, configMismatch: [], preemptions,
  };
}
