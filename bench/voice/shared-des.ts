// The shared-fleet workload (shared.ts) in virtual time: the same voice sessions and batch workers,
// the same prompts and seeds, against the simulator's engine and block pool (bench/sim/engine.ts,
// kv-cache.ts) on a virtual clock, behind the gateway's own per-replica limiter
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
import { resolveConfig, type SimReplicaOptions } from '../sim/config.js';
import { createEngine, type EngineClock } from '../sim/engine.js';
import { createBlockPool } from '../sim/kv-cache.js';
import { planOutput } from '../sim/output.js';
import { parseChat } from '../sim/request.js';
import { createSeq, NO_SALT_ROOT } from '../sim/sequence.js';
import { frontendMs } from '../sim/timing.js';
import { SPECIAL } from '../sim/tokenizer.js';
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

// A min-heap of timers in time order (FIFO among equal times). The run loop awaits once after each
// timer, so the limiter's admissions (promises it resolves inside a release) continue at the
// virtual instant they were made, before the next timer.
interface Timer { at: number; order: number; fn: () => void; cancelled: boolean }
function createClock() {
  const heap: Timer[] = [];
  let now = 0;
  let order = 0;
  const less = (a: Timer, b: Timer) => a.at < b.at || (a.at === b.at && a.order < b.order);
  const swap = (i: number, j: number) => { [heap[i], heap[j]] = [heap[j], heap[i]]; };
  const clock: EngineClock & { run(untilMs: number): Promise<void>; pending(): number } = {
    now: () => now,
    pending: () => heap.length,
    setTimeout(fn, ms) {
      const t: Timer = { at: now + Math.max(0, ms), order: order++, fn, cancelled: false };
      heap.push(t);
      for (let i = heap.length - 1; i > 0 && less(heap[i], heap[(i - 1) >> 1]); i = (i - 1) >> 1) swap(i, (i - 1) >> 1);
      return t;
    },
    clearTimeout(h) {
      if (h) (h as Timer).cancelled = true;
    },
    async run(untilMs) {
      while (heap.length > 0 && heap[0].at <= untilMs) {
        const top = heap[0];
        const last = heap.pop()!;
        if (heap.length > 0) {
          heap[0] = last;
          for (let i = 0; ;) {
            const l = 2 * i + 1;
            let m = i;
            if (l < heap.length && less(heap[l], heap[m])) m = l;
            if (l + 1 < heap.length && less(heap[l + 1], heap[m])) m = l + 1;
            if (m === i) break;
            swap(i, m);
            i = m;
          }
        }
        if (top.cancelled) continue;
        now = top.at;
        top.fn();
        await null;
      }
    },
  };
  return clock;
}

type Clock = ReturnType<typeof createClock>;

interface Answer { ttftMs: number | null; content: string }

function createReplica(clock: Clock, index: number, o: DesSharedOptions) {
  const config = resolveConfig({ outputTokens: { min: o.outputTokens[0], max: o.outputTokens[1] }, schedulingPolicy: 'priority', longPrefillTokenThreshold: o.longPrefill, ...o.replica }, index);
  const pool = createBlockPool(config.kvBlocks, null, config.blockSize);
  const engine = createEngine(config, pool, { onAdmit() {}, onFirstToken() {}, onToken() {}, onFinish() {}, onPreempt() {} }, clock);
  let ids = 0;
  return {
    /** One streamed chat request: `first` at its first token, `done` when it is complete; `abort` before its first token only. */
    serve(body: Record<string, unknown>, first: () => void, done: (a: Answer) => void): { abort(): boolean } {
      const g = parseChat(body, config);
      if ('status' in g) throw new Error(`replica refused: ${g.status} ${JSON.stringify(g.body)}`);
      const arrival = clock.now();
      const plan = planOutput({ seed: config.seed, prompt: g.prompt, length: g.ignoreEos ? { min: g.maxTokens + 1, max: g.maxTokens + 1 } : config.outputTokens, tool: g.tool, eosId: SPECIAL.endOfTurn });
      let ttftMs: number | null = null;
      const seq = createSeq({
        id: `d-${index}-${ids++}`, prompt: g.prompt, root: NO_SALT_ROOT, plan, maxOut: Math.min(plan.ids.length, g.maxTokens), httpArrivalMs: arrival, priority: g.priority,
        sink: {
          onToken(_s, i) {
            if (i !== 0) return;
            ttftMs = clock.now() - arrival;
            first();
          },
          onFinish(s) {
            done({ ttftMs, content: plan.deltas.slice(0, s.generated).map((d) => (d.t === 'text' ? d.text : '')).join('') });
          },
        },
      });
      const due = arrival + frontendMs(config, g.prompt.length);
      let aborted = false;
      clock.setTimeout(() => { if (!aborted) engine.submit(seq, due); }, due - arrival);
      return {
        abort() {
          if (aborted || ttftMs !== null) return false;
          aborted = true;
          engine.abort(seq);
          return true;
        },
      };
    },
  };
}

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
        const h = replicas[i].serve(body, () => { cut[i].delete(entry); limiters[i].prefilled(prefill); }, res);
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
        await new Promise<void>((res) => rep.serve({ stream: true, messages: [{ role: 'system', content: system }, { role: 'user', content: 'hi' }], max_tokens: 1 }, () => {}, () => res()));
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
        const a = await new Promise<Answer>((res) => replicas[at].serve(body, () => {
          first = clock.now() + o.gatewayMs;
          limiters[at].prefilled('interactive');
          if (--callers[at] === 0) for (const go of resume[at].splice(0)) go();
        }, res));
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
    await clock.run(Infinity);
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
