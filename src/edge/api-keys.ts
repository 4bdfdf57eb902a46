import { createHash, timingSafeEqual } from 'node:crypto';
import { unwatchFile, watchFile } from 'node:fs';
import type { Logger } from 'pino';
import { readApiKeysFile, type ApiKeyEntry } from '../config/api-keys.js';

/** One configured client key, as the data plane sees it: never the key itself. */
export interface ClientKey {
  name: string;
  maxConcurrent: number;
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

function entriesOf(list: readonly ApiKeyEntry[], previous: readonly Entry[]): Entry[] {
  // A key kept across a reload is the same object, updated in place: requests open under it give
  // their slot back to the count the next ones are checked against.
  const byHash = new Map(previous.map((e) => [e.digest.toString('hex'), e.key]));
  return list.map((k) => {
    const hex = k.sha256.toLowerCase();
    const key = byHash.get(hex) ?? { name: k.name, maxConcurrent: k.maxConcurrent, open: 0 };
    key.name = k.name;
    key.maxConcurrent = k.maxConcurrent;
    return { digest: Buffer.from(hex, 'hex'), key };
  });
}

/**
 * Client API keys, stored as SHA-256 hashes. A presented key is hashed and compared with every
 * stored hash in constant time (no early exit), so neither the match nor its position shows in
 * the timing. Keys from a file are reloaded when the file changes (polled, which also sees a
 * Kubernetes Secret's symlink swap); a file that does not validate is logged and the keys in
 * force stay.
 */
export function createKeyring(opts: { keys: readonly ApiKeyEntry[]; file: string | null; log: Logger }): Keyring {
  const fromConfig = opts.keys;
  let entries = entriesOf(fromConfig, []);
  const load = () => {
    if (opts.file === null) return;
    try {
      entries = entriesOf([...fromConfig, ...readApiKeysFile(opts.file)], entries);
      opts.log.info({ file: opts.file, keys: entries.length }, 'client API keys loaded');
    } catch (e) {
      opts.log.warn({ file: opts.file, err: (e as Error).message }, 'client API keys file rejected: the keys in force stay');
    }
  };
  load();
  if (opts.file !== null) watchFile(opts.file, { interval: POLL_MS, persistent: false }, load);
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
      if (opts.file !== null) unwatchFile(opts.file, load);
    },
  };
}
