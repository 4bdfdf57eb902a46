import pino, { type Logger, type LoggerOptions } from 'pino';
import pretty from 'pino-pretty';

/**
 * Where a credential could sit in a log object: headers (an error's request, a debug dump), a
 * replica's configuration. Nothing the gateway logs on purpose carries one (client and replica
 * keys never enter a log object; tests check it); these paths are the net under that rule. Fixed
 * paths only, no wildcards: each costs a property lookup, not a walk of every line.
 */
const REDACT = [
  'headers.authorization', 'headers.cookie', 'headers["x-api-key"]', 'headers["proxy-authorization"]',
  'req.headers.authorization', 'req.headers.cookie', 'req.headers["x-api-key"]',
  'request.headers.authorization', 'request.headers.cookie',
  'authorization', 'cookie', 'apiKey', 'token', 'upstream.apiKey', 'config.admin.token',
];

/** Pino options shared by the gateway. */
export function loggerOptions(level: string): LoggerOptions {
  return { level, base: { svc: 'warmroute' }, redact: { paths: REDACT, censor: '[redacted]' } };
}

const FLUSH_EVERY_MS = 1_000;

/** `json` for machines (the default), `pretty` for a person at a terminal (config logging.format). */
export type LogFormat = 'json' | 'pretty';

/**
 * pino-pretty in the process, not as a worker transport: a terminal reader's gateway is not the
 * one whose per-request overhead is measured, and a synchronous stream cannot lose the last lines
 * on exit. Time as wall clock, level by name, and none of the fields every line carries.
 */
function prettyStream(destination?: pino.DestinationStream): pino.DestinationStream {
  return pretty({
    colorize: destination === undefined && process.stdout.isTTY === true,
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname,svc',
    singleLine: true,
    sync: true,
    ...(destination ? { destination } : {}),
  });
}

/** Lines are written out once this many bytes are pending (or the timer flushes them). */
const WRITE_AT_BYTES = 32_768;
/** sonic-boom's bound on one write; it must exceed WRITE_AT_BYTES. */
const MAX_WRITE_BYTES = 65_536;

/**
 * Logs to stdout through a buffered, asynchronous destination: one write per 32 KiB (~60 access
 * lines) instead of one per line, which measurably cut the gateway's added TTFT (see the
 * overhead benchmark); each write costs the event loop ~15 µs on the development VM (handing the
 * buffer to libuv's thread pool) whatever its size. A timer flushes the buffer every second so
 * quiet periods still log promptly; fatal and exit paths flush synchronously. The pretty format
 * writes each line as it comes.
 *
 * The destination holds Buffers (sonic-boom's `buffer` mode), each line encoded once as it is
 * written: in its default mode sonic-boom appends each line to one pending string and measures that
 * string's UTF-8 length on every write, which flattens it — ~5 KB of garbage and ~2 µs per access
 * line with 8 KiB pending, more the more is pending (docs/design-notes.md, "The request path at
 * the floor").
 */
export function createLogger(level: string, destination?: pino.DestinationStream, format: LogFormat = 'json'): Logger {
  if (format === 'pretty') return pino(loggerOptions(level), prettyStream(destination));
  if (destination) return pino(loggerOptions(level), destination);
  const dest = pino.destination({ dest: 1, sync: false, minLength: WRITE_AT_BYTES, maxWrite: MAX_WRITE_BYTES, contentMode: 'buffer' });
  const timer = setInterval(() => dest.flush(), FLUSH_EVERY_MS);
  timer.unref();
  process.once('exit', () => {
    clearInterval(timer);
    try { dest.flushSync(); } catch { /* stdout already gone */ }
  });
  // In buffer mode sonic-boom's write takes a Buffer (its types only describe the utf8 mode).
  const writeBytes = dest.write.bind(dest) as unknown as (bytes: Buffer) => boolean;
  const lines = { write: (line: string) => writeBytes(Buffer.from(line)), flush: (cb?: (err?: Error) => void) => dest.flush(cb) };
  return pino(loggerOptions(level), lines);
}

export type { Logger };
