import { createHash, timingSafeEqual } from 'node:crypto';
import { statSync, unwatchFile, watchFile, type Stats } from 'node:fs';
import type { Logger } from 'pino';
import { readApiKeysFile, type ApiKeyEntry } from '../config/api-keys.js';
import type { Metrics } from '../telemetry/metrics.js';

/** One configured client key, as the data plane sees it: never the key itself. */
export interface ClientKey {
  name: string;
  maxConcurrent: number;
  /** The priority class of its requests; null: from the request. */
  priority: 'interactive' | 'batch' | null;
  /** Requests open with this key now. */
  open: number;
}

interface Entry { readonly digest: Buffer; readonly key: ClientKey }

export interface Keyring {
  /** No keys configured: the data plane is open. */
  readonly open: boolean;
  /** The key an `Authorization: Bearer` header holds, or why not. */
  check(authorization: string | undefined): ClientKey | 'missing' | 'invalid';
  close(): void;
}

const POLL_MS = 1_000;
/**
 * A file written in place (truncate, then write in pieces) is read only once its size and mtime
 * have held still this long: a reader between two pieces would take a valid but shorter list for
 * the new one. A rename (Kubernetes Secret, `mv`) is atomic and settles at once.
 */
export const API_KEYS_SETTLE_MS = 1_000;

/** Why a read of the keys file was not applied: a bounded metric label. */
export const API_KEYS_FILE_REJECTIONS = ['invalid', 'empty', 'unreadable'] as const;
type Rejection = (typeof API_KEYS_FILE_REJECTIONS)[number];

function entriesOf(list: readonly ApiKeyEntry[], previous: readonly Entry[]): Entry[] {
  // A key kept across a reload is the same object, updated in place: requests open under it give
  // their slot back to the count the next ones are checked against.
  const byHash = new Map(previous.map((e) => [e.digest.toString('hex'), e.key]));
  return list.map((k) => {
    const hex = k.sha256.toLowerCase();
    const key = byHash.get(hex) ?? { name: k.name, maxConcurrent: k.maxConcurrent, priority: k.priority ?? null, open: 0 };
    key.name = k.name;
    key.maxConcurrent = k.maxConcurrent;
    key.priority = k.priority ?? null;
    return { digest: Buffer.from(hex, 'hex'), key };
  });
}

/**
 * Client API keys, stored as SHA-256 hashes. A presented key is hashed and compared with every
 * stored hash in constant time (no early exit), so neither the match nor its position shows in
 * the timing. Keys from a file are reloaded when the file changes (polled, which also sees a
 * Kubernetes Secret's symlink swap), once the file has settled. A file that does not validate,
 * and one that lists no key while the file held some (emptied, or caught half-written), is
 * logged, counted, and the keys in force stay: "no keys" there would refuse every client.
 */
export function createKeyring(opts: { keys: readonly ApiKeyEntry[]; file: string | null; log: Logger; metrics?: Metrics }): Keyring {
  const fromConfig = opts.keys;
  let entries = entriesOf(fromConfig, []);
  let fileKeys = 0;
  let settling: NodeJS.Timeout | null = null;
  let closed = false;
  const reject = (reason: Rejection, err: string) => {
    opts.metrics?.apiKeysFileRejected.inc({ reason });
    opts.log.warn({ file: opts.file, reason, err, keysInForce: entries.length }, 'client API keys file rejected: the keys in force stay');
  };
  const apply = () => {
    if (opts.file === null) return;
    let list: ApiKeyEntry[];
    try {
      list = readApiKeysFile(opts.file);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      return reject(code === undefined ? 'invalid' : 'unreadable', (e as Error).message);
    }
    if (list.length === 0 && fileKeys > 0) return reject('empty', `no key listed; it held ${fileKeys}`);
    entries = entriesOf([...fromConfig, ...list], entries);
    fileKeys = list.length;
    opts.log.info({ file: opts.file, keys: entries.length }, 'client API keys loaded');
  };
  const stamp = (st: Stats | null) => (st === null ? 'absent' : `${st.size} ${st.mtimeMs} ${st.ino}`);
  const statOf = (): Stats | null => {
    try { return statSync(opts.file!); } catch { return null; }
  };
  // Read once the file has held still for API_KEYS_SETTLE_MS: a write still going on moves it.
  const settle = (seen: string) => {
    if (settling) clearTimeout(settling);
    settling = setTimeout(() => {
      settling = null;
      if (closed) return;
      const now = stamp(statOf());
      if (now !== seen) return settle(now);
      apply();
    }, API_KEYS_SETTLE_MS);
    settling.unref();
  };
  const changed = (curr: Stats) => settle(stamp(curr.nlink === 0 && curr.mtimeMs === 0 ? null : curr));
  apply();
  if (opts.file !== null) watchFile(opts.file, { interval: POLL_MS, persistent: false }, changed);
  const configured = fromConfig.length > 0 || opts.file !== null;
  return {
    open: !configured,
    check(authorization) {
      if (authorization === undefined || !/^bearer\s+/i.test(authorization)) return 'missing';
      const digest = createHash('sha256').update(authorization.replace(/^bearer\s+/i, '')).digest();
      let found: ClientKey | null = null;
      for (const e of entries) if (timingSafeEqual(e.digest, digest)) found = e.key;
      return found ?? 'invalid';
    },
    close() {
      closed = true;
      if (settling) clearTimeout(settling);
      if (opts.file !== null) unwatchFile(opts.file, changed);
    },
  };
}
