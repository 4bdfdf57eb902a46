import type { IncomingMessage } from 'node:http';
import { errors, type WarmrouteError } from '../errors.js';

/** Small chunks are copied into blocks of this size instead of being kept one Buffer each. */
const BLOCK_BYTES = 64 * 1024;
/** A chunk at least this large is kept as it arrived (copying it would gain nothing). */
const KEEP_CHUNK_BYTES = 16 * 1024;

/**
 * Collects a request body into memory proportional to its size, however it was chunked.
 *
 * A body with a Content-Length goes into one buffer of that length (or is the single chunk it
 * arrived in). A chunked body of many tiny chunks would otherwise cost a Buffer object per chunk —
 * a 1-byte-per-chunk upload measured ~390 bytes of heap per body byte — so small chunks are copied
 * into 64 KiB blocks and only large ones are kept whole. The blocks are joined once at the end.
 */
export function createBodyCollector(declared: number | null) {
  let exact: Buffer | null = null;
  let only: Buffer | null = null;
  let size = 0;
  const parts: Buffer[] = [];
  let block: Buffer | null = null;
  let blockUsed = 0;

  function flushBlock() {
    if (block !== null && blockUsed > 0) parts.push(block.subarray(0, blockUsed));
    block = null;
    blockUsed = 0;
  }

  return {
    get size() { return size; },
    push(chunk: Buffer) {
      if (declared !== null) {
        // Node's parser enforces the declared length: the chunks add up to it exactly.
        if (size === 0 && chunk.length === declared) only = chunk;
        else {
          exact ??= Buffer.allocUnsafe(declared);
          if (only !== null) { only.copy(exact, 0); only = null; }
          chunk.copy(exact, size);
        }
      } else if (chunk.length >= KEEP_CHUNK_BYTES) {
        flushBlock();
        parts.push(chunk);
      } else {
        if (block === null || blockUsed + chunk.length > block.length) {
          flushBlock();
          block = Buffer.allocUnsafe(BLOCK_BYTES);
        }
        chunk.copy(block, blockUsed);
        blockUsed += chunk.length;
      }
      size += chunk.length;
    },
    body(): Buffer {
      if (declared !== null) return only ?? exact ?? Buffer.alloc(0);
      flushBlock();
      return parts.length === 1 ? parts[0] : Buffer.concat(parts, size);
    },
  };
}

export interface BodyLimits {
  /** Largest body accepted. */
  readonly maxBytes: number;
}

/** How long, and how much more, a refused upload is read and discarded so its client sees the answer. */
const DRAIN_MS = 2_000;
const DRAIN_BYTES = 32 * 1024 * 1024;

/**
 * Reads the request body, then calls `done` once: with the body, or with a 413 when it is larger
 * than the limit (declared or as it arrives). After a 413 the rest of the upload is read and
 * dropped for a bounded time and size, so a client still writing can read the answer instead of
 * failing its write on a closed connection; then the connection is closed.
 */
export function readBody(req: IncomingMessage, limits: BodyLimits, done: (err: WarmrouteError | null, body: Buffer | null) => void): void {
  const header = req.headers['content-length'];
  const declared = header === undefined ? null : Number(header);
  if (declared !== null && declared > limits.maxBytes) {
    discardBody(req);
    done(errors.bodyTooLarge([limits.maxBytes]), null);
    return;
  }
  const collector = createBodyCollector(declared);
  let over = false;
  const onData = (c: Buffer) => {
    if (collector.size + c.length > limits.maxBytes) {
      over = true;
      req.off('data', onData);
      req.off('end', onEnd);
      discardBody(req);
      done(errors.bodyTooLarge([limits.maxBytes]), null);
      return;
    }
    collector.push(c);
  };
  const onEnd = () => { if (!over) done(null, collector.body()); };
  req.on('data', onData);
  req.on('end', onEnd);
  // The client went away mid-body: there is nobody to answer.
  req.on('error', () => {});
}

/**
 * Reads and drops the rest of a refused request's body, at most DRAIN_BYTES more and for at most
 * DRAIN_MS, then closes the connection if the body has not ended by then.
 */
export function discardBody(req: IncomingMessage): void {
  if (req.complete) return;
  let discarded = 0;
  const stop = () => { clearTimeout(timer); req.socket.destroy(); };
  const timer = setTimeout(stop, DRAIN_MS);
  timer.unref();
  req.on('data', (c: Buffer) => {
    discarded += c.length;
    if (discarded > DRAIN_BYTES) stop();
  });
  req.on('end', () => clearTimeout(timer));
  req.resume();
}
