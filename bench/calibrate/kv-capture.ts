// Each replica's KV events over a recorded run, off its ZMQ publisher (decoded by the gateway's own
// reader, src/fleet/kv-events/decode.ts): how many blocks it stored and removed, and when. The
// simulator's block pool publishes the same events, so a replay can be held to them too.

import { Subscriber } from 'zeromq';
import { decodeFrame } from '../../src/fleet/kv-events/decode.js';

export interface KvTally {
  /** Blocks stored (BlockStored hashes) and removed (BlockRemoved hashes: evictions). */
  stored: number;
  removed: number;
  /** Batches that would not decode. */
  undecodable: number;
}

export interface KvCapture {
  /** Stops listening; the tallies, fleet order. */
  stop(): Promise<KvTally[]>;
}

export async function captureKvEvents(endpoints: readonly { endpoint: string; topic?: string }[]): Promise<KvCapture> {
  const tallies: KvTally[] = endpoints.map(() => ({ stored: 0, removed: 0, undecodable: 0 }));
  const subs = endpoints.map((e, i) => {
    const sub = new Subscriber({ linger: 0 });
    sub.connect(e.endpoint);
    sub.subscribe(e.topic ?? '');
    const done = (async () => {
      for await (const frames of sub) {
        try {
          for (const ev of decodeFrame(frames).batch.events) {
            if (ev.type === 'stored') tallies[i].stored += ev.hashes.length;
            else if (ev.type === 'removed') tallies[i].removed += ev.hashes.length;
          }
        } catch {
          tallies[i].undecodable++;
        }
      }
    })().catch(() => { /* closed */ });
    return { sub, done };
  });
  // A SUB socket drops what is published before its subscription reaches the publisher.
  await new Promise((r) => setTimeout(r, 300));
  return {
    async stop() {
      // What the engine published last is on its way: give it a moment.
      await new Promise((r) => setTimeout(r, 500));
      for (const s of subs) s.sub.close();
      await Promise.all(subs.map((s) => s.done));
      return tallies;
    },
  };
}
