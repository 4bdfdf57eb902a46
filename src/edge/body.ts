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
 * A class (one per request, its methods on the prototype), not an object of closures and a getter
 * made anew for every body.
 */
class BodyCollector {
  private exact: Buffer | null = null;
  private only: Buffer | null = null;
  size = 0;
  private parts: Buffer[] | null = null;
  private block: Buffer | null = null;
  private blockUsed = 0;

  constructor(private readonly declared: number | null) {}

  private flushBlock(): void {
    if (this.block !== null && this.blockUsed > 0) (this.parts ??= []).push(this.block.subarray(0, this.blockUsed));
    this.block = null;
    this.blockUsed = 0;
  }

  push(chunk: Buffer): void {
    const declared = this.declared;
    if (declared !== null) {
      // Node's parser enforces the declared length: the chunks add up to it exactly.
      if (this.size === 0 && chunk.length === declared) this.only = chunk;
      else {
        this.exact ??= Buffer.allocUnsafe(declared);
        if (this.only !== null) { this.only.copy(this.exact, 0); this.only = null; }
        chunk.copy(this.exact, this.size);
      }
    } else if (chunk.length >= KEEP_CHUNK_BYTES) {
      this.flushBlock();
      (this.parts ??= []).push(chunk);
    } else {
      if (this.block === null || this.blockUsed + chunk.length > this.block.length) {
        this.flushBlock();
        this.block = Buffer.allocUnsafe(BLOCK_BYTES);
      }
      chunk.copy(this.block, this.blockUsed);
      this.blockUsed += chunk.length;
    }
    this.size += chunk.length;
  }

  body(): Buffer {
    if (this.declared !== null) return this.only ?? this.exact ?? Buffer.alloc(0);
    this.flushBlock();
    const parts = this.parts ?? [];
    return parts.length === 1 ? parts[0] : Buffer.concat(parts, this.size);
  }
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
  const collector = new BodyCollector(declared);
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
  req.on('error', ignore);
}

const ignore = () => {};

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
