/**
 * One replica's KV event stream: a zeromq SUB socket on its publisher, in sequence order.
 *
 * - In order (seq = last + 1): the batch is handed on.
 * - A gap (seq > last + 1): the missing batches are asked of the replay socket (a DEALER on vLLM's
 *   ROUTER: [empty, start seq] out, [empty, topic, seq, payload] back until seq -1), live batches held
 *   meanwhile; a replay that fails, times out or no longer has the start means the stream is `lost`
 *   until it is back in order, and the replica's residency starts over.
 * - The sequence going back (a new publisher, i.e. a restarted engine): `restarted`, it starts empty.
 * Every failure is counted and logged (throttled); nothing here throws into the gateway.
 */

import { Dealer, Subscriber } from 'zeromq';
import type { KvEvent } from '../../routing/kv-residency.js';
import { decodeBatch, decodeSeq, encodeSeq, KvDecodeError, ofMedium, type KvEventBatch } from './decode.js';

export type StreamState = 'live' | 'restarted' | 'lost';

export interface KvStreamObserver {
  batch(replica: string, events: readonly KvEvent[], lagSeconds: number): void;
  state(replica: string, state: StreamState, why: string): void;
  gap(replica: string, missed: number): void;
  replay(replica: string, outcome: 'ok' | 'failed' | 'timeout' | 'incomplete' | 'overflow' | 'none'): void;
  error(replica: string, reason: string, detail: string): void;
}

export interface KvSubscriberOptions {
  readonly replica: string;
  readonly endpoint: string;
  readonly replayEndpoint: string | null;
  readonly topic: string;
  readonly medium: string;
  readonly replayTimeoutMs: number;
  readonly maxPendingBatches: number;
  readonly observer: KvStreamObserver;
  readonly now?: () => number;
}

export interface KvSubscriber {
  readonly endpoint: string;
  /** The last sequence number applied (null before the first). */
  lastSeq(): bigint | null;
  close(): void;
}

/**
 * A replay reply as a DEALER receives it, after the empty delimiter: [topic, seq, payload] from
 * vLLM 0.32 (the end marker has an empty topic and payload), [seq, payload] from older releases.
 */
function replyFrames(frames: Buffer[]): { seqFrame: Buffer; payload: Buffer } {
  const f = frames.length > 0 && frames[0].length === 0 ? frames.slice(1) : frames;
  if (f.length === 3) return { seqFrame: f[1], payload: f[2] };
  if (f.length === 2) return { seqFrame: f[0], payload: f[1] };
  throw new KvDecodeError('frames', `replay reply of ${frames.length} frames`);
}

interface Pending {
  readonly seq: bigint;
  readonly batch: KvEventBatch;
}

export function createKvSubscriber(o: KvSubscriberOptions): KvSubscriber {
  const now = o.now ?? Date.now;
  const sub = new Subscriber({ linger: 0 });
  let closed = false;
  let last: bigint | null = null;
  let replaying: Pending[] | null = null;
  let lost = false;

  function deliver(seq: bigint, batch: KvEventBatch): void {
    last = seq;
    if (batch.unknown > 0) o.observer.error(o.replica, 'unknown_event', `${batch.unknown} event(s) of an unknown kind skipped`);
    o.observer.batch(o.replica, ofMedium(batch.events, o.medium), Math.max(0, now() / 1000 - batch.ts));
  }

  function markLost(why: string): void {
    if (!lost) o.observer.state(o.replica, 'lost', why);
    lost = true;
  }

  async function replay(from: bigint, upTo: bigint): Promise<{ got: Pending[]; outcome: 'ok' | 'failed' | 'timeout' | 'incomplete' }> {
    if (o.replayEndpoint === null) return { got: [], outcome: 'failed' };
    const dealer = new Dealer({ linger: 0, receiveTimeout: o.replayTimeoutMs, sendTimeout: o.replayTimeoutMs });
    const got: Pending[] = [];
    try {
      dealer.connect(o.replayEndpoint);
      await dealer.send([Buffer.alloc(0), encodeSeq(from)]);
      const deadline = now() + o.replayTimeoutMs;
      for (;;) {
        if (now() > deadline) return { got, outcome: 'timeout' };
        const { seqFrame, payload } = replyFrames(await dealer.receive());
        const seq = decodeSeq(seqFrame);
        if (seq < 0n) break;
        if (seq >= from && seq < upTo) got.push({ seq, batch: decodeBatch(payload as Buffer) });
      }
    } catch (e) {
      const timeout = (e as { code?: string }).code === 'EAGAIN';
      if (!timeout) o.observer.error(o.replica, e instanceof KvDecodeError ? e.reason : 'replay', e instanceof Error ? e.message : String(e));
      return { got, outcome: timeout ? 'timeout' : 'failed' };
    } finally {
      dealer.close();
    }
    const complete = got.length > 0 && got[0].seq === from && got.every((p, i) => p.seq === from + BigInt(i)) && got[got.length - 1].seq === upTo - 1n;
    return { got, outcome: complete ? 'ok' : 'incomplete' };
  }

  async function fillGap(from: bigint, first: Pending): Promise<void> {
    replaying = [first];
    const r = await replay(from, first.seq);
    const held = replaying;
    replaying = null;
    if (closed) return;
    if (held.length > o.maxPendingBatches) {
      o.observer.replay(o.replica, 'overflow');
      markLost('replay_overflow');
    } else if (r.outcome === 'ok') {
      o.observer.replay(o.replica, 'ok');
      for (const p of r.got) deliver(p.seq, p.batch);
      if (lost) {
        lost = false;
        o.observer.state(o.replica, 'live', 'replayed');
      }
    } else {
      o.observer.replay(o.replica, o.replayEndpoint === null ? 'none' : r.outcome);
      markLost(`gap_${r.outcome}`);
    }
    // Held live batches, in order; a lost stream counts from the newest as its new start.
    for (const p of held) onBatch(p.seq, p.batch);
  }

  function onBatch(seq: bigint, batch: KvEventBatch): void {
    if (replaying !== null) {
      if (replaying.length <= o.maxPendingBatches) replaying.push({ seq, batch });
      return;
    }
    if (last === null) {
      o.observer.state(o.replica, 'live', 'first_batch');
      deliver(seq, batch);
      return;
    }
    if (seq === last + 1n) {
      if (lost) {
        // Back in order after a lost stretch: exact again from here (the router dropped the
        // block mapping when the stream was lost, so it is learnt anew).
        lost = false;
        o.observer.state(o.replica, 'live', 'resynced');
      }
      deliver(seq, batch);
      return;
    }
    if (seq <= last) {
      o.observer.state(o.replica, 'restarted', 'sequence_reset');
      lost = false;
      deliver(seq, batch);
      return;
    }
    o.observer.gap(o.replica, Number(seq - last - 1n));
    if (lost) {
      // Already not trusted: take this as the new start rather than chase a replay.
      last = seq - 1n;
      onBatch(seq, batch);
      return;
    }
    fillGap(last + 1n, { seq, batch }).catch((e: unknown) => o.observer.error(o.replica, 'replay', e instanceof Error ? e.message : String(e)));
  }

  async function run(): Promise<void> {
    sub.connect(o.endpoint);
    sub.subscribe(o.topic);
    while (!closed) {
      let frames: Buffer[];
      try {
        frames = await sub.receive();
      } catch (e) {
        if (closed) return;
        o.observer.error(o.replica, 'socket', e instanceof Error ? e.message : String(e));
        await new Promise((r) => setTimeout(r, 1000).unref());
        continue;
      }
      try {
        if (frames.length !== 3) throw new KvDecodeError('frames', `message of ${frames.length} frames, want 3`);
        onBatch(decodeSeq(frames[1]), decodeBatch(frames[2]));
      } catch (e) {
        o.observer.error(o.replica, e instanceof KvDecodeError ? e.reason : 'apply', e instanceof Error ? e.message : String(e));
      }
    }
  }

  run().catch((e: unknown) => o.observer.error(o.replica, 'socket', e instanceof Error ? e.message : String(e)));

  return {
    endpoint: o.endpoint,
    lastSeq: () => last,
    close() {
      if (closed) return;
      closed = true;
      sub.close();
    },
  };
}
