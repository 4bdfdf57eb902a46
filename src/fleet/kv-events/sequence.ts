/**
 * One KV event stream's sequence and the state it puts the stream in: the one owner of whether
 * a stream (one replica, one data-parallel rank) is live, replaying, lost or proving itself. No
 * sockets here (subscriber.ts reads them and hands every frame in), so every transition is
 * testable alone.
 *
 * - In order (seq = last + 1): the batch is delivered.
 * - A gap (seq > last + 1): the missing batches are asked of the replay socket, live batches held
 *   meanwhile (`replaying`); a replay that fails, times out, overflows or does not exist means
 *   removals may have gone by unseen: `lost`, and the router forgets what it had matched there.
 * - After `lost`, the next batch is the new start, and the stream is `proving` until
 *   PROVE_BATCHES batches in a row have arrived in order; only then is it `live` (exact) again.
 *   A gap while proving starts the proof over.
 * - The sequence going back (a new publisher, i.e. a restarted engine): `restarted`, it starts
 *   empty, in order from there (live).
 * - A frame whose payload cannot be decoded still carries its sequence number: it is counted and
 *   its sequence advances, so the next batch is not a gap.
 */

import type { KvEvent } from '../../routing/kv-residency.js';
import { decodeBatch, decodeSeq, KvDecodeError, ofMedium, type KvEventBatch } from './decode.js';

/** What the router is told: in order (exact), starting empty, or no longer to be trusted. */
export type StreamState = 'live' | 'restarted' | 'lost';
/** The stream's own condition; `proving` and `replaying` are reported as their own states to the log and metrics. */
export type SequenceState = 'waiting' | 'live' | 'replaying' | 'lost' | 'proving';

export type ReplayOutcome = 'ok' | 'failed' | 'timeout' | 'incomplete' | 'overflow' | 'none';

export interface KvStreamObserver {
  batch(replica: string, rank: number, events: readonly KvEvent[], lagSeconds: number): void;
  state(replica: string, rank: number, state: StreamState | 'proving', why: string): void;
  gap(replica: string, missed: number): void;
  replay(replica: string, outcome: ReplayOutcome): void;
  error(replica: string, reason: string, detail: string): void;
}

export interface ReplayResult {
  readonly got: readonly { readonly seq: bigint; readonly batch: KvEventBatch }[];
  readonly outcome: 'ok' | 'failed' | 'timeout' | 'incomplete';
}

export interface StreamSequenceOptions {
  readonly replica: string;
  readonly rank: number;
  readonly medium: string;
  readonly maxPendingBatches: number;
  readonly observer: KvStreamObserver;
  /** Asks the replay socket for [from, upTo); null: no replay socket (a gap loses the stream). */
  readonly replay: ((from: bigint, upTo: bigint) => Promise<ReplayResult>) | null;
  readonly now?: () => number;
}

export interface StreamSequence {
  /** One PUB message as received: [topic, seq, payload]. Never throws. */
  frame(frames: readonly Uint8Array[]): void;
  batch(seq: bigint, batch: KvEventBatch): void;
  state(): SequenceState;
  lastSeq(): bigint | null;
  close(): void;
}

/**
 * In-order batches a stream must deliver after a loss before it is exact again. A publisher that
 * dropped a batch once (its high-water mark, a network blip) may keep dropping; a few batches in
 * a row show it has stopped. A busy replica sends several per second.
 */
export const PROVE_BATCHES = 8;

// A payload that would not decode (its error already counted): an empty batch in its place.
const UNDECODABLE: KvEventBatch = { ts: 0, events: [], dpRank: null, unknown: 0, undecodable: 0 };

export function createStreamSequence(o: StreamSequenceOptions): StreamSequence {
  const now = o.now ?? Date.now;
  let last: bigint | null = null;
  let state: SequenceState = 'waiting';
  let held: { seq: bigint; batch: KvEventBatch }[] = [];
  let proved = 0;
  let closed = false;

  function deliver(seq: bigint, batch: KvEventBatch): void {
    last = seq;
    if (batch.unknown > 0) o.observer.error(o.replica, 'unknown_event', `${batch.unknown} event(s) of an unknown kind skipped`);
    if (batch.undecodable > 0) o.observer.error(o.replica, 'undecodable_event', `${batch.undecodable} event(s) that could not be decoded skipped`);
    o.observer.batch(o.replica, o.rank, ofMedium(batch.events, o.medium), Math.max(0, now() / 1000 - batch.ts));
  }

  function to(next: SequenceState, why: string): void {
    state = next;
    if (next === 'live') o.observer.state(o.replica, o.rank, 'live', why);
    else if (next === 'lost') o.observer.state(o.replica, o.rank, 'lost', why);
    else if (next === 'proving') o.observer.state(o.replica, o.rank, 'proving', why);
  }

  function lose(why: string): void {
    proved = 0;
    to('lost', why);
  }

  /** After a loss: `seq` is the new start, and the proof begins with it. */
  function startOver(seq: bigint): void {
    proved = 0;
    last = seq - 1n;
    to('proving', 'new_start');
  }

  async function fillGap(from: bigint, first: { seq: bigint; batch: KvEventBatch }): Promise<void> {
    const was = state;
    state = 'replaying';
    held = [first];
    let r: ReplayResult;
    try {
      r = await (o.replay as NonNullable<typeof o.replay>)(from, first.seq);
    } catch (e) {
      o.observer.error(o.replica, e instanceof KvDecodeError ? e.reason : 'replay', e instanceof Error ? e.message : String(e));
      r = { got: [], outcome: 'failed' };
    }
    const pending = held;
    held = [];
    if (closed) return;
    state = was;
    if (pending.length > o.maxPendingBatches) {
      o.observer.replay(o.replica, 'overflow');
      lose('replay_overflow');
    } else if (r.outcome === 'ok') {
      o.observer.replay(o.replica, 'ok');
      for (const p of r.got) deliver(p.seq, p.batch);
    } else {
      o.observer.replay(o.replica, r.outcome);
      lose(`gap_${r.outcome}`);
    }
    // Held live batches, in order; a lost stream takes the first as its new start.
    if (state === 'lost' && pending.length > 0) startOver(pending[0].seq);
    for (const p of pending) batch(p.seq, p.batch);
  }

  function inOrder(seq: bigint, b: KvEventBatch): void {
    deliver(seq, b);
    if (state === 'proving' && ++proved >= PROVE_BATCHES) to('live', 'resynced');
  }

  function batch(seq: bigint, b: KvEventBatch): void {
    if (closed) return;
    if (state === 'replaying') {
      if (held.length <= o.maxPendingBatches) held.push({ seq, batch: b });
      return;
    }
    if (last === null) {
      to('live', 'first_batch');
      deliver(seq, b);
      return;
    }
    if (seq === last + 1n) return inOrder(seq, b);
    if (seq <= last) {
      // A new publisher: its cache starts empty and its stream is in order from here.
      proved = 0;
      state = 'live';
      o.observer.state(o.replica, o.rank, 'restarted', 'sequence_reset');
      deliver(seq, b);
      return;
    }
    o.observer.gap(o.replica, Number(seq - last - 1n));
    if (state === 'lost') {
      // Not trusted already: this batch is the new start.
      startOver(seq);
      return inOrder(seq, b);
    }
    if (o.replay === null) {
      o.observer.replay(o.replica, 'none');
      lose('gap_none');
      startOver(seq);
      return inOrder(seq, b);
    }
    fillGap(last + 1n, { seq, batch: b }).catch((e: unknown) => o.observer.error(o.replica, 'replay', e instanceof Error ? e.message : String(e)));
  }

  return {
    frame(frames) {
      let seq: bigint;
      try {
        if (frames.length !== 3) throw new KvDecodeError('frames', `message of ${frames.length} frames, want 3`);
        seq = decodeSeq(frames[1]);
      } catch (e) {
        o.observer.error(o.replica, e instanceof KvDecodeError ? e.reason : 'apply', e instanceof Error ? e.message : String(e));
        return;
      }
      let b: KvEventBatch;
      try {
        b = decodeBatch(frames[2]);
      } catch (e) {
        // Its events are lost, not its place in the sequence.
        o.observer.error(o.replica, e instanceof KvDecodeError ? e.reason : 'apply', e instanceof Error ? e.message : String(e));
        b = UNDECODABLE;
      }
      try {
        batch(seq, b);
      } catch (e) {
        o.observer.error(o.replica, 'apply', e instanceof Error ? e.message : String(e));
      }
    },
    batch,
    state: () => state,
    lastSeq: () => last,
    close() {
      closed = true;
      held = [];
    },
  };
}
