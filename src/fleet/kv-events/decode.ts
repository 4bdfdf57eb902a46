/**
 * vLLM's KV cache events as they come off its ZMQ PUB socket: a multipart message
 * [topic, 8-byte big-endian sequence number, msgpack payload], the payload one KVEventBatch.
 *
 * vLLM has encoded the batch in two shapes, and a fleet in a rolling upgrade sends both:
 *   - positional (msgspec `array_like` structs): the batch is [ts, events, dp_rank?] and each
 *     event [tag, ...fields in declaration order], trailing defaults omitted;
 *   - tagged maps (2026): the batch is {ts, events, data_parallel_rank?} and each event a map with
 *     its class name under "type".
 * Block hashes are integers (64-bit, possibly above 2^53, possibly negative) in older releases and
 * bytes in newer ones; both become one lower-case hex string, so a hash is a Map key either way.
 */

import { Decoder } from '@msgpack/msgpack';

import type { AllBlocksCleared, BlockKey, BlockRemoved, BlockStored, KvEvent } from '../../routing/kv-residency.js';

export type { AllBlocksCleared, BlockKey, BlockRemoved, BlockStored, KvEvent };

export interface KvEventBatch {
  /** Unix seconds when the engine published the batch. */
  readonly ts: number;
  readonly events: readonly KvEvent[];
  readonly dpRank: number | null;
  /** Events of a kind this gateway does not know (counted, skipped). */
  readonly unknown: number;
  /** Events of a known kind that would not decode (counted, skipped: the rest of the batch stands). */
  readonly undecodable: number;
}

export interface KvFrame {
  readonly topic: string;
  readonly seq: bigint;
  readonly batch: KvEventBatch;
}

/** A frame that is not a KV event batch; `reason` is a bounded metric label. */
export class KvDecodeError extends Error {
  constructor(readonly reason: 'frames' | 'sequence' | 'msgpack' | 'shape', message: string) {
    super(message);
  }
}

// 64-bit integers as bigint: a hash above 2^53 must not lose its low bits to a double.
const decoder = new Decoder({ useBigInt64: true });

const HEX: string[] = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

/** One spelling per hash: integers as their unsigned 64-bit hex, bytes as hex. */
export function blockKeyOf(h: unknown): BlockKey {
  if (typeof h === 'bigint') return BigInt.asUintN(64, h).toString(16);
  if (typeof h === 'number' && Number.isInteger(h)) return BigInt.asUintN(64, BigInt(h)).toString(16);
  if (h instanceof Uint8Array) {
    let s = '';
    for (let i = 0; i < h.length; i++) s += HEX[h[i]];
    return s;
  }
  throw new KvDecodeError('shape', `block hash of type ${typeof h}`);
}

const toNumber = (v: unknown): number | null => (typeof v === 'number' ? v : typeof v === 'bigint' ? Number(v) : null);
const toStr = (v: unknown): string | null => (typeof v === 'string' ? v : null);

function keys(v: unknown, what: string): BlockKey[] {
  if (!Array.isArray(v)) throw new KvDecodeError('shape', `${what} is not a list`);
  return v.map(blockKeyOf);
}

const countOf = (v: unknown): number | null => (Array.isArray(v) ? v.length : null);

/** Field values by name, from either shape. The positional order is vLLM's declaration order. */
const FIELDS = {
  BlockStored: ['block_hashes', 'parent_block_hash', 'token_ids', 'block_size', 'lora_id', 'medium', 'lora_name'],
  BlockRemoved: ['block_hashes', 'medium'],
  AllBlocksCleared: [],
} as const;

type Tag = keyof typeof FIELDS;

function eventOf(raw: unknown): KvEvent | null {
  let tag: unknown;
  let get: (field: string) => unknown;
  if (Array.isArray(raw)) {
    tag = raw[0];
    if (typeof tag !== 'string' || !(tag in FIELDS)) return null;
    const order = FIELDS[tag as Tag] as readonly string[];
    get = (field) => raw[order.indexOf(field) + 1];
  } else if (raw !== null && typeof raw === 'object') {
    const m = raw as Record<string, unknown>;
    tag = m.type;
    get = (field) => m[field];
  } else {
    throw new KvDecodeError('shape', 'event is neither a list nor a map');
  }
  switch (tag) {
    case 'BlockStored': {
      const parent = get('parent_block_hash');
      return {
        type: 'stored',
        hashes: keys(get('block_hashes'), 'block_hashes'),
        parent: parent === null || parent === undefined ? null : blockKeyOf(parent),
        tokenCount: countOf(get('token_ids')),
        blockSize: toNumber(get('block_size')),
        medium: toStr(get('medium')),
      };
    }
    case 'BlockRemoved':
      return { type: 'removed', hashes: keys(get('block_hashes'), 'block_hashes'), medium: toStr(get('medium')) };
    case 'AllBlocksCleared':
      return { type: 'cleared' };
    default:
      return null;
  }
}

/** The msgpack payload of one frame. Throws KvDecodeError. */
export function decodeBatch(payload: Uint8Array): KvEventBatch {
  let raw: unknown;
  try {
    raw = decoder.decode(payload);
  } catch (e) {
    throw new KvDecodeError('msgpack', e instanceof Error ? e.message : String(e));
  }
  let ts: unknown, events: unknown, dp: unknown;
  if (Array.isArray(raw)) [ts, events, dp] = raw;
  else if (raw !== null && typeof raw === 'object') ({ ts, events, data_parallel_rank: dp } = raw as Record<string, unknown>);
  else throw new KvDecodeError('shape', 'batch is neither a list nor a map');
  if (!Array.isArray(events)) throw new KvDecodeError('shape', 'batch has no event list');
  const out: KvEvent[] = [];
  let unknown = 0;
  let undecodable = 0;
  for (const e of events) {
    let ev: KvEvent | null;
    try {
      ev = eventOf(e);
    } catch (err) {
      if (!(err instanceof KvDecodeError)) throw err;
      undecodable++;
      continue;
    }
    if (ev === null) unknown++;
    else out.push(ev);
  }
  return { ts: toNumber(ts) ?? 0, events: out, dpRank: toNumber(dp), unknown, undecodable };
}

/** An 8-byte big-endian sequence number (vLLM sends -1 as the end of a replay). */
export function decodeSeq(b: Uint8Array): bigint {
  if (b.length !== 8) throw new KvDecodeError('sequence', `sequence frame of ${b.length} bytes`);
  return new DataView(b.buffer, b.byteOffset, 8).getBigInt64(0, false);
}

export function encodeSeq(seq: bigint): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigInt64BE(seq);
  return b;
}

/** A PUB message: [topic, seq, payload]. */
export function decodeFrame(frames: readonly Uint8Array[]): KvFrame {
  if (frames.length !== 3) throw new KvDecodeError('frames', `message of ${frames.length} frames, want 3`);
  return { topic: Buffer.from(frames[0]).toString('utf8'), seq: decodeSeq(frames[1]), batch: decodeBatch(frames[2]) };
}

/**
 * The events of one tier. A block offloaded to CPU memory is not in the GPU cache a prefill reads
 * first, so routing counts the GPU tier only unless told otherwise; a null medium is the GPU (the
 * releases before offloading had no other).
 */
export function ofMedium(events: readonly KvEvent[], medium: string): KvEvent[] {
  const want = medium.toUpperCase();
  return events.filter((e) => e.type === 'cleared' || (e.medium ?? 'GPU').toUpperCase() === want);
}
