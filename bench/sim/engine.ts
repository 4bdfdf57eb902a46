// The engine core: a vLLM V1-style scheduler driven by timers (real ones, or a virtual clock).
//
// Each step: running sequences first (one token each when decoding, the next chunk when still
// prefilling, at most --long-prefill-token-threshold tokens of it when set), preempting the most recently admitted one when the KV pool cannot grow; then, if
// nothing was preempted, waiting sequences in FIFO order while seats (max_num_seqs), token budget
// (max_num_batched_tokens) and blocks last. A step's duration comes from timing.ts; tokens are
// sampled and streamed when it ends. The loop runs only while there is work: no idle timers.
// Steps are laid end to end on a virtual clock, so a late timer does not stretch the next step.
// The clock is injectable: the real one by default, a virtual one for a discrete-event run
// (bench/scale/des/) that drives this same scheduler without waiting.

import type { SimConfig } from './config.js';
import type { BlockPool } from './kv-cache.js';
import { ensureHashes, type FinishReason, type Seq } from './sequence.js';
import { stepMs, type StepItem } from './timing.js';

export interface EngineHooks {
  onAdmit(seq: Seq, queriedTokens: number, hitTokens: number, firstTime: boolean): void;
  onFirstToken(seq: Seq): void;
  onToken(seq: Seq): void;
  onFinish(seq: Seq, reason: FinishReason): void;
  onPreempt(seq: Seq): void;
  /** Whether a waiting sequence may join the batch beside `running` (LoRA slots, lora.ts); absent: always. */
  mayAdmit?(seq: Seq, running: readonly Seq[]): boolean;
}

export interface Engine {
  /**
   * Queue a sequence. `dueMs` is when it was due to arrive (performance.now() time); an idle
   * engine starts its step from then, so a late frontend timer does not add to the TTFT.
   */
  submit(seq: Seq, dueMs?: number): void;
  abort(seq: Seq): boolean;
  abortAll(): void;
  running(): number;
  waiting(): number;
  /** Multiplies step times (the "slow" fault). */
  setSlowFactor(f: number): void;
  /** Drop all sequences and empty the KV cache (a restart). */
  reset(): void;
  stop(): void;
}

/** Where the engine reads the time and sets its step timer. */
export interface EngineClock {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const REAL_CLOCK: EngineClock = {
  now: () => performance.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
};

interface Scheduled extends StepItem {
  seq: Seq;
}

const RESYNC_MS = 50;

export function createEngine(cfg: SimConfig, pool: BlockPool, hooks: EngineHooks, clock: EngineClock = REAL_CLOCK): Engine {
  const bs = cfg.blockSize;
  let waiting: Seq[] = [];
  let running: Seq[] = [];
  /** Inside complete(): the step's items are being handed out. */
  let completing = false;
  let timer: unknown = null;
  let stepEnd = 0;
  let stepStart = 0;
  let slow = 1;

  function releaseBlocks(seq: Seq): void {
    pool.release(seq.blocks);
    seq.blocks = [];
    seq.cachedBlocks = 0;
  }

  /** Grow seq's blocks to hold `upTo` tokens and register the full ones in the prefix cache. */
  function grow(seq: Seq, upTo: number, hits: number[]): boolean {
    const need = Math.ceil(upTo / bs) - seq.blocks.length - hits.length;
    if (!pool.canAllocate(hits, need)) return false;
    if (hits.length > 0) {
      pool.touch(hits);
      seq.blocks.push(...hits);
      seq.cachedBlocks = seq.blocks.length;
    }
    if (need > 0) seq.blocks.push(...pool.allocate(need));
    if (cfg.enablePrefixCaching) {
      const full = Math.floor(upTo / bs);
      ensureHashes(seq, full, bs);
      for (let i = seq.cachedBlocks; i < full; i++) pool.cache(seq.blocks[i], seq.hashes[i], i > 0 ? seq.hashes[i - 1] : null, () => seq.tokens.slice(i * bs, (i + 1) * bs));
      seq.cachedBlocks = Math.max(seq.cachedBlocks, full);
    }
    return true;
  }

  // --scheduling-policy priority (vLLM V1): the waiting queue is ordered by (priority, arrival), a
  // preempted request goes back in its place there, and the victim of a preemption is the running
  // request with the largest (priority, arrival) rather than the last admitted.
  const byPriority = cfg.schedulingPolicy === 'priority';
  const after = (a: Seq, b: Seq) => a.priority > b.priority || (a.priority === b.priority && a.engineArrivalMs > b.engineArrivalMs);
  function enqueue(seq: Seq): void {
    let i = waiting.length;
    while (i > 0 && after(waiting[i - 1], seq)) i--;
    waiting.splice(i, 0, seq);
  }
  function victimIndex(): number {
    if (!byPriority) return running.length - 1;
    let v = running.length - 1;
    for (let i = 0; i < running.length; i++) if (after(running[i], running[v])) v = i;
    return v;
  }

  function preempt(seq: Seq): void {
    releaseBlocks(seq);
    seq.numComputed = 0;
    seq.status = 'waiting';
    seq.preemptions++;
    if (byPriority) enqueue(seq);
    else waiting.unshift(seq);
    hooks.onPreempt(seq);
  }

  /**
   * Only waiting requests that arrived by `cutoff` are seen: with async scheduling a step is
   * scheduled when the one before it starts, so what arrived after that waits a step more.
   */
  function schedule(cutoff: number): Scheduled[] {
    const out: Scheduled[] = [];
    // vLLM's --long-prefill-token-threshold: a prompt's chunk in one step is at most this, for a
    // running request and a waiting one alike, so one long prefill leaves budget for the others;
    // as in vLLM, not when it is the only request (there is nobody to leave budget for).
    const threshold = running.length + waiting.length > 1 ? cfg.longPrefillTokenThreshold : 0;
    const chunkOf = (left: number) => (threshold > 0 && left > threshold ? threshold : left);
    let budget = cfg.maxNumBatchedTokens;
    let preempted = false;
    for (let i = 0; i < running.length && budget > 0; i++) {
      const seq = running[i];
      const n = Math.min(chunkOf(seq.tokens.length - seq.numComputed), budget);
      if (n <= 0) continue;
      let self = false;
      while (!grow(seq, seq.numComputed + n, [])) {
        const vi = victimIndex();
        const victim = running.splice(vi, 1)[0];
        // A victim ahead of this one moves it back a place: the loop must not skip the next.
        if (vi < i) i--;
        const at = out.findIndex((s) => s.seq === victim);
        if (at >= 0) budget += out.splice(at, 1)[0].n;
        preempt(victim);
        preempted = true;
        if (victim === seq) {
          self = true;
          break;
        }
      }
      if (self) break;
      out.push({ seq, n, ctx: seq.numComputed, decode: n === 1 && seq.generated > 0 });
      budget -= n;
    }
    for (let w = 0; !preempted && w < waiting.length && running.length < cfg.maxNumSeqs && budget > 0;) {
      const seq = waiting[w];
      if (seq.engineArrivalMs > cutoff || (hooks.mayAdmit !== undefined && !hooks.mayAdmit(seq, running))) {
        w++;
        continue;
      }
      let hits: number[] = [];
      if (cfg.enablePrefixCaching) {
        // vLLM always recomputes the last token, so at most (len-1) rounded down to a block hits.
        const maxBlocks = Math.floor((seq.tokens.length - 1) / bs);
        ensureHashes(seq, maxBlocks, bs);
        hits = pool.lookup((k) => seq.hashes[k], maxBlocks);
      }
      const computed = hits.length * bs;
      const n = Math.min(chunkOf(seq.tokens.length - computed), budget);
      // vLLM 0.32 admits a waiting request only when blocks for all of its tokens are free, not
      // just for its first chunk (scheduler_reserve_full_isl, on by default): concurrent prefills
      // then queue instead of preempting each other halfway.
      if (cfg.kvModel === 'vllm' && !pool.canAllocate(hits, Math.ceil(Math.min(seq.tokens.length, cfg.maxModelLen) / bs) - hits.length)) break;
      if (!grow(seq, computed + n, hits)) break;
      waiting.splice(w, 1);
      seq.numComputed = computed;
      seq.status = 'running';
      running.push(seq);
      const first = seq.cachedTokens < 0;
      if (first) seq.cachedTokens = computed;
      hooks.onAdmit(seq, seq.tokens.length, computed, first);
      out.push({ seq, n, ctx: computed, decode: false });
      budget -= n;
    }
    return out;
  }

  function finish(seq: Seq, reason: FinishReason): void {
    const at = running.indexOf(seq);
    if (at >= 0) running.splice(at, 1);
    releaseBlocks(seq);
    seq.status = 'finished';
    hooks.onFinish(seq, reason);
    seq.sink.onFinish(seq, reason);
  }

  function complete(items: Scheduled[]): void {
    const now = clock.now();
    completing = true;
    try {
      completeItems(items, now);
    } finally {
      completing = false;
    }
  }

  function completeItems(items: Scheduled[], now: number): void {
    for (const it of items) {
      const seq = it.seq;
      if (seq.status !== 'running') continue; // aborted or preempted during the step
      seq.numComputed += it.n;
      if (seq.numComputed < seq.tokens.length) continue; // a prefill chunk, more to come
      const index = seq.generated;
      seq.tokens.push(seq.plan.ids[index]);
      seq.generated++;
      if (index === 0) {
        seq.firstTokenMs = now;
        hooks.onFirstToken(seq);
      }
      hooks.onToken(seq);
      seq.sink.onToken(seq, index);
      if (seq.status !== 'running') continue; // the sink aborted it (client gone, fault)
      if (seq.generated >= seq.plan.ids.length) finish(seq, 'stop');
      else if (seq.generated >= seq.maxOut) finish(seq, 'length');
    }
  }

  function startStep(backToBack: boolean, dueMs?: number): void {
    if (timer || (running.length === 0 && waiting.length === 0)) return;
    const now = clock.now();
    // A step that follows another starts where that one ended (so a late timer does not
    // stretch it); one woken by an arrival starts when the arrival was due; when far behind
    // on a starved machine, it starts now.
    let start = now;
    if (backToBack && now - stepEnd < RESYNC_MS) start = stepEnd;
    else if (dueMs !== undefined && now - dueMs < RESYNC_MS) start = Math.min(now, Math.max(dueMs, stepEnd));
    // Async scheduling: a step that follows another was scheduled when that one started.
    const items = schedule(cfg.asyncScheduling && backToBack ? stepStart : Infinity);
    if (items.length === 0) {
      // Only late arrivals wait: vLLM schedules them as soon as its queue of steps has room.
      if (waiting.length > 0) timer = clock.setTimeout(() => { timer = null; startStep(false); }, 0);
      return;
    }
    stepStart = start;
    stepEnd = start + stepMs(cfg, items) * slow;
    timer = clock.setTimeout(() => {
      timer = null;
      complete(items);
      startStep(true);
    }, Math.max(0, stepEnd - now));
  }

  function remove(list: Seq[], seq: Seq): boolean {
    const at = list.indexOf(seq);
    if (at < 0) return false;
    list.splice(at, 1);
    return true;
  }

  const api: Engine = {
    submit(seq, dueMs) {
      seq.status = 'waiting';
      seq.engineArrivalMs = dueMs !== undefined ? Math.min(dueMs, clock.now()) : clock.now();
      if (byPriority) enqueue(seq);
      else waiting.push(seq);
      startStep(false, dueMs);
    },
    abort(seq) {
      if (seq.status !== 'waiting' && seq.status !== 'running' && seq.status !== 'frontend') return false;
      remove(waiting, seq);
      remove(running, seq);
      releaseBlocks(seq);
      seq.status = 'aborted';
      hooks.onFinish(seq, 'abort');
      // A freed seat or blocks may let a waiting request in at the next step. A sink that aborts
      // during a step's completion (a fault) must not start another step in the middle of it:
      // the step in progress starts the next one when it is done.
      if (!completing) startStep(false);
      return true;
    },
    abortAll() {
      for (const seq of [...running, ...waiting]) api.abort(seq);
    },
    running: () => running.length,
    waiting: () => waiting.length,
    setSlowFactor(f) {
      slow = f > 0 ? f : 1;
    },
    reset() {
      if (timer) clock.clearTimeout(timer);
      timer = null;
      for (const seq of [...running, ...waiting]) seq.status = 'aborted';
      running = [];
      waiting = [];
      pool.reset();
    },
    stop() {
      if (timer) clock.clearTimeout(timer);
      timer = null;
    },
  };
  return api;
}
