// vLLM's KV event publisher, as the simulator's block pool sees it: the same wire format
// ([topic, 8-byte big-endian seq, msgpack KVEventBatch] on a zeromq PUB socket) and the same replay
// service (a ROUTER socket: [identity, empty, start seq] in; [identity, empty, topic, seq, payload]
// per buffered batch out, then an empty topic, seq -1 and an empty payload), as captured from vLLM
// 0.32 (test/fixtures/kv-events/). The batch is positional [ts, events, dp_rank] with each event a
// tagged map, as vLLM 0.32 sends it; `shape: 'array'` makes the events positional too (older releases). Events of one tick go out as one batch,
// as vLLM sends one per engine step. A restarted replica starts again from sequence 0.

import { Encoder } from '@msgpack/msgpack';
import { Publisher, Router } from 'zeromq';

/** What the block pool reports. */
export interface BlockEventSink {
  stored(hash: number, parent: number | null, tokenIds: readonly number[], blockSize: number): void;
  removed(hash: number): void;
  cleared(): void;
}

export interface KvEventsOptions {
  /** 0 = a free port. */
  port?: number;
  replayPort?: number;
  topic?: string;
  /** The events' encoding: tagged maps as vLLM 0.32 sends them (default), or the older positional arrays. */
  shape?: 'map' | 'array';
  /** Past batches kept for replay (vLLM's buffer_steps). */
  bufferSteps?: number;
  /**
   * Bench knob: each stored block is followed by this many more the pool does not hold, chained
   * under it and never removed, so that a gateway's fleet-wide block budget (kvEvents.maxBlocks)
   * fills in a run of minutes. Their hashes are negative, never an engine block's, and they carry
   * no token ids (the gateway reads none; the run is about its memory). 0 = none.
   */
  padBlocks?: number;
}

export interface SimKvPublisher {
  readonly endpoint: string;
  readonly replayEndpoint: string;
  readonly topic: string;
  readonly sink: BlockEventSink;
  /** Sequence number of the next batch. */
  nextSeq(): number;
  /** Fault: the next n batches are not sent (they stay in the replay buffer), a gap for subscribers. */
  dropNext(n: number): void;
  /** A new engine process: pending events dropped, the replay buffer emptied, sequence back to 0. */
  restart(): void;
  close(): void;
}

type Ev = [string, ...unknown[]];

const END_SEQ = (() => {
  const b = Buffer.alloc(8);
  b.writeBigInt64BE(-1n);
  return b;
})();

function seqBytes(seq: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigInt64BE(BigInt(seq));
  return b;
}

export async function startKvPublisher(host: string, o: KvEventsOptions = {}): Promise<SimKvPublisher> {
  const pub = new Publisher({ linger: 0, sendHighWaterMark: 100_000 });
  const router = new Router({ linger: 0 });
  await pub.bind(`tcp://${host}:${o.port ?? 0}`);
  await router.bind(`tcp://${host}:${o.replayPort ?? 0}`);
  const endpoint = pub.lastEndpoint as string;
  const replayEndpoint = router.lastEndpoint as string;
  const topic = Buffer.from(o.topic ?? '');
  const shape = o.shape ?? 'map';
  const keep = o.bufferSteps ?? 10_000;
  const encoder = new Encoder();
  const buffer: [number, Buffer][] = [];
  let pending: Ev[] = [];
  let scheduled = false;
  let seq = 0;
  // Pad blocks published so far (padBlocks): the next one is −(padded + 1).
  const pad = Math.max(0, Math.floor(o.padBlocks ?? 0));
  let padded = 0;
  let drop = 0;
  let closed = false;
  // zeromq allows one send in flight per socket: sends are chained.
  let pubChain: Promise<void> = Promise.resolve();
  let routerChain: Promise<void> = Promise.resolve();

  function encodeEvent(e: Ev): unknown {
    const [type, ...f] = e;
    if (shape === 'array') {
      // Declaration order, lora_id, medium and lora_name included (vLLM omits trailing defaults only).
      if (type === 'BlockStored') return [type, f[0], f[1], f[2], f[3], null, 'GPU', null];
      if (type === 'BlockRemoved') return [type, f[0], 'GPU'];
      return [type];
    }
    if (type === 'BlockStored') return { type, block_hashes: f[0], parent_block_hash: f[1], token_ids: f[2], block_size: f[3], lora_id: null, medium: 'GPU', lora_name: null, extra_keys: (f[0] as unknown[]).map(() => null), group_idx: 0, kv_cache_spec_kind: 'full_attention' };
    if (type === 'BlockRemoved') return { type, block_hashes: f[0], medium: 'GPU', group_idx: 0 };
    return { type };
  }

  function flush(): void {
    scheduled = false;
    if (closed || pending.length === 0) return;
    const events = pending;
    pending = [];
    const ts = Date.now() / 1000;
    const batch = [ts, events.map(encodeEvent), 0];
    const payload = Buffer.from(encoder.encode(batch));
    const s = seq++;
    buffer.push([s, payload]);
    if (buffer.length > keep) buffer.shift();
    if (drop > 0) {
      drop--;
      return;
    }
    const frames = [topic, seqBytes(s), payload];
    pubChain = pubChain.then(() => pub.send(frames)).catch(() => undefined);
  }

  function push(e: Ev): void {
    if (closed) return;
    // Consecutive stores of one chain merge into one event, as vLLM reports a request's new blocks;
    // removals go one hash per event, as vLLM 0.32 sends them.
    const last = pending[pending.length - 1];
    if (e[0] === 'BlockStored' && last?.[0] === 'BlockStored') {
      const hashes = last[1] as number[];
      if (hashes[hashes.length - 1] === e[2]) {
        hashes.push(...(e[1] as number[]));
        (last[3] as number[]).push(...(e[3] as number[]));
        return;
      }
    }
    pending.push(e);
    if (!scheduled) {
      scheduled = true;
      setImmediate(flush);
    }
  }

  async function serveReplays(): Promise<void> {
    while (!closed) {
      let msg: Buffer[];
      try {
        msg = await router.receive();
      } catch {
        return; // closed
      }
      if (msg.length !== 3 || msg[2].length !== 8) continue;
      const [id, , start] = msg;
      const from = Number(start.readBigInt64BE());
      // vLLM 0.32's reply: [identity, empty, topic, seq, payload]; the end marker has an empty topic.
      const out = buffer.filter(([s]) => s >= from).map(([s, p]) => [id, Buffer.alloc(0), topic, seqBytes(s), p]);
      out.push([id, Buffer.alloc(0), Buffer.alloc(0), END_SEQ, Buffer.alloc(0)]);
      routerChain = routerChain.then(async () => {
        for (const frames of out) await router.send(frames);
      }).catch(() => undefined);
    }
  }
  void serveReplays();

  return {
    endpoint,
    replayEndpoint,
    topic: topic.toString(),
    sink: {
      stored(hash, parent, tokenIds, blockSize) {
        push(['BlockStored', [hash], parent, [...tokenIds], blockSize]);
        if (pad > 0) {
          const hashes: number[] = [];
          for (let i = 0; i < pad; i++) hashes.push(-(++padded));
          pending.push(['BlockStored', hashes, hash, [], blockSize]);
        }
      },
      removed: (hash) => push(['BlockRemoved', [hash]]),
      cleared: () => push(['AllBlocksCleared']),
    },
    nextSeq: () => seq,
    dropNext(n) {
      drop += n;
    },
    restart() {
      pending = [];
      buffer.length = 0;
      seq = 0;
      drop = 0;
    },
    close() {
      if (closed) return;
      closed = true;
      pub.close();
      router.close();
    },
  };
}
