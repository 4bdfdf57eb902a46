import { xx } from './hash.js';

/**
 * A stable, injective byte rendering of JSON values, written into one reusable buffer and hashed
 * with xxhash64 in a single call per chain link.
 *
 * Why not JSON.stringify: key order would follow the client's serializer (two clients sending the
 * same content part as {type,text} and {text,type} render the same prompt on vLLM and must hash
 * the same), escaping costs a pass over every string, and it allocates a fresh string per message.
 * Here object keys are sorted, strings are length-prefixed instead of escaped (so no value can
 * forge a separator), and the bytes go straight from the strings into the buffer with encodeInto.
 *
 * Routing is synchronous, so one module-level buffer is safe: a walk never interleaves with another.
 */

const encoder = new TextEncoder();
const INITIAL_BYTES = 64 * 1024;
/** A buffer grown past this by one huge request is dropped afterwards instead of pinned forever. */
const KEEP_BYTES = 1 << 20;

let buf = new Uint8Array(INITIAL_BYTES);
let len = 0;
/** UTF-8 bytes of string content written since the last reset (framing excluded): the token estimate's input. */
let textBytes = 0;

/** One ASCII byte per JSON type, so a string can never be read as a number or a container. */
const Tag = { String: 0x73, Number: 0x6e, True: 0x74, False: 0x66, Null: 0x7a, Array: 0x61, Object: 0x6f, Colon: 0x3a } as const;

export function resetWriter(): void {
  len = 0;
  textBytes = 0;
  if (buf.length > KEEP_BYTES) buf = new Uint8Array(INITIAL_BYTES);
}

export function writtenTextBytes(): number {
  return textBytes;
}

function ensure(extra: number): void {
  if (len + extra <= buf.length) return;
  const next = new Uint8Array(Math.max(buf.length * 2, len + extra));
  next.set(buf.subarray(0, len));
  buf = next;
}

export function writeByte(b: number): void {
  ensure(1);
  buf[len++] = b;
}

/** Non-negative integer as ASCII digits, without allocating a string. */
function writeUint(n: number): void {
  ensure(16);
  if (n === 0) {
    buf[len++] = 0x30;
    return;
  }
  let digits = 0;
  for (let m = n; m > 0; m = Math.floor(m / 10)) digits++;
  for (let i = len + digits - 1; i >= len; i--) {
    buf[i] = 0x30 + (n % 10);
    n = Math.floor(n / 10);
  }
  len += digits;
}

/** Raw UTF-8 of a string with no framing; returns the bytes written. */
function writeRaw(s: string): number {
  ensure(s.length * 3);
  const { written } = encoder.encodeInto(s, buf.subarray(len));
  len += written;
  return written;
}

/**
 * An inline image or audio clip (`data:` URL) is hashed in full but counted as this many bytes of
 * text: its base64 says nothing about the tokens an encoder makes of it (hundreds to a few
 * thousand), and counting it as text would inflate the estimate by orders of magnitude.
 */
export const DATA_URL_TEXT_BYTES = 4096;

export function writeString(s: string): void {
  writeByte(Tag.String);
  writeUint(s.length);
  writeByte(Tag.Colon);
  const bytes = writeRaw(s);
  textBytes += bytes > DATA_URL_TEXT_BYTES && s.startsWith('data:') ? DATA_URL_TEXT_BYTES : bytes;
}

/** Any JSON value, walked with sorted object keys. */
export function writeValue(v: unknown): void {
  switch (typeof v) {
    case 'string':
      writeString(v);
      return;
    case 'number':
      writeByte(Tag.Number);
      writeRaw(String(v));
      writeByte(Tag.Colon);
      return;
    case 'boolean':
      writeByte(v ? Tag.True : Tag.False);
      return;
    case 'object':
      if (v === null) {
        writeByte(Tag.Null);
      } else if (Array.isArray(v)) {
        writeByte(Tag.Array);
        writeUint(v.length);
        writeByte(Tag.Colon);
        for (let i = 0; i < v.length; i++) writeValue(v[i]);
      } else {
        const o = v as Record<string, unknown>;
        const keys = Object.keys(o).sort();
        writeByte(Tag.Object);
        writeUint(keys.length);
        writeByte(Tag.Colon);
        for (const k of keys) {
          writeString(k);
          writeValue(o[k]);
        }
      }
      return;
    default:
      // undefined, functions, symbols: not JSON; the parsed body never holds them.
      writeByte(Tag.Null);
  }
}

/** A named optional field: absent fields write nothing, so {a} and {a, b: absent} hash the same. */
export function writeField(id: number, v: unknown): void {
  if (v === undefined) return;
  writeByte(id);
  writeValue(v);
}

/** xxhash64 of everything written since the last reset, chained on `seed`. */
export function digest(seed: bigint): bigint {
  return xx.h64Raw(buf.subarray(0, len), seed);
}

