/**
 * One KV event stream's sockets: a zeromq SUB on the publisher of one replica's data-parallel
 * rank, and a DEALER on its replay socket when there is one ([empty, start seq] out, [empty,
 * topic, seq, payload] back until seq -1). Every frame goes to the stream's sequence
 * (sequence.ts), which owns what state the stream is in. Sockets are opened with IPv6 on, so a
 * `tcp://[::1]:5557` endpoint (or a host name resolving to an IPv6 address) is reached.
 * Every failure is counted and logged (throttled); nothing here throws into the gateway.
 */

import { Dealer, Subscriber } from 'zeromq';
import { decodeBatch, decodeSeq, encodeSeq, KvDecodeError } from './decode.js';
import { createStreamSequence, type KvStreamObserver, type ReplayResult, type SequenceState } from './sequence.js';

export type { KvStreamObserver, StreamState } from './sequence.js';

export interface KvSubscriberOptions {
  readonly replica: string;
  /** The data-parallel rank this stream is (0 for a replica without data parallelism). */
  readonly rank?: number;
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
  state(): SequenceState;
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

export function createKvSubscriber(o: KvSubscriberOptions): KvSubscriber {
  const now = o.now ?? Date.now;
  const sub = new Subscriber({ linger: 0, ipv6: true });
  let closed = false;

  async function replay(from: bigint, upTo: bigint): Promise<ReplayResult> {
    const dealer = new Dealer({ linger: 0, ipv6: true, receiveTimeout: o.replayTimeoutMs, sendTimeout: o.replayTimeoutMs });
    const got: { seq: bigint; batch: ReturnType<typeof decodeBatch> }[] = [];
    try {
      dealer.connect(o.replayEndpoint as string);
      await dealer.send([Buffer.alloc(0), encodeSeq(from)]);
      const deadline = now() + o.replayTimeoutMs;
      for (;;) {
        if (now() > deadline) return { got, outcome: 'timeout' };
        const { seqFrame, payload } = replyFrames(await dealer.receive());
        const seq = decodeSeq(seqFrame);
        if (seq < 0n) break;
        if (seq >= from && seq < upTo) got.push({ seq, batch: decodeBatch(payload) });
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

  const sequence = createStreamSequence({ replica: o.replica, rank: o.rank ?? 0, medium: o.medium, maxPendingBatches: o.maxPendingBatches, observer: o.observer, replay: o.replayEndpoint === null ? null : replay, now });

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
      sequence.frame(frames);
    }
  }

  run().catch((e: unknown) => o.observer.error(o.replica, 'socket', e instanceof Error ? e.message : String(e)));

  return {
    endpoint: o.endpoint,
    lastSeq: () => sequence.lastSeq(),
    state: () => sequence.state(),
    close() {
      if (closed) return;
      closed = true;
      sequence.close();
      sub.close();
    },
  };
}
