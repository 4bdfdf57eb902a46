import { access, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { ADAPTER_NAME_PATTERN, type AdaptersConfig } from '../config/schema.js';
import type { Metrics } from '../telemetry/metrics.js';

// A directory entry's name never holds a '/', so the pattern's own '/' never matches one here.
const NAME = new RegExp(ADAPTER_NAME_PATTERN);

/** What vLLM reads from a PEFT adapter's directory: one without it is no adapter (yet). */
export const ADAPTER_CONFIG_FILE = 'adapter_config.json';

export interface DirectoryListing {
  /** Adapter name → its path as the replicas see it (vLLM's lora_path). */
  readonly adapters: Readonly<Record<string, string>>;
  /** Subdirectories left out, with why: not an adapter name, or no adapter_config.json (yet). */
  readonly skipped: readonly { readonly name: string; readonly why: string }[];
}

/**
 * The adapters of one directory: each subdirectory (or link to one) that holds an
 * adapter_config.json, named after it, at `replicaPath/<name>`. Hidden entries (`.name`: an upload
 * in progress, a volume's own files) are not adapters and not reported. Rejects when `listPath`
 * cannot be read.
 */
export async function listAdapterDirectory(listPath: string, replicaPath: string): Promise<DirectoryListing> {
  const entries = await readdir(listPath, { withFileTypes: true });
  const adapters: Record<string, string> = {};
  const skipped: { name: string; why: string }[] = [];
  // The replicas' path is in their filesystem (POSIX), whatever the gateway's host is.
  const base = replicaPath.replace(/\/+$/, '');
  for (const e of entries.sort((a, b) => a.name.localeCompare(b.name))) {
    if (e.name.startsWith('.')) continue;
    const local = join(listPath, e.name);
    const isDir = e.isDirectory() || (e.isSymbolicLink() && (await stat(local).then((s) => s.isDirectory(), () => false)));
    if (!isDir) continue;
    if (!NAME.test(e.name)) {
      skipped.push({ name: e.name, why: 'not an adapter name (letters, digits, _ . : -, at most 128)' });
      continue;
    }
    if (!(await access(join(local, ADAPTER_CONFIG_FILE)).then(() => true, () => false))) {
      skipped.push({ name: e.name, why: `no ${ADAPTER_CONFIG_FILE}` });
      continue;
    }
    adapters[e.name] = `${base}/${e.name}`;
  }
  return { adapters, skipped };
}

/**
 * The adapters the gateway may load: adapters.directory's, then adapters.sources (a name in both is
 * the source's); directory.base is the base of each listed one that adapters.bases does not name.
 */
export function mergedSources(o: AdaptersConfig, listed: Readonly<Record<string, string>>): AdaptersConfig {
  if (Object.keys(listed).length === 0) return o;
  const base = o.directory.base;
  const bases = base === '' ? o.bases : { ...Object.fromEntries(Object.keys(listed).map((name) => [name, base])), ...o.bases };
  return { ...o, sources: { ...listed, ...o.sources }, bases };
}

export interface AdapterDirectory {
  /** Reads the directory now (start, a reload); resolves once read or failed (the last list stays). */
  scan(): Promise<void>;
  /** adapters.directory changed (a reload): read again under the new settings. */
  setOptions(o: AdaptersConfig): Promise<void>;
  /** The last list read. */
  listed(): Readonly<Record<string, string>>;
  stop(): void;
}

export interface AdapterDirectoryDeps {
  readonly options: AdaptersConfig;
  readonly log: Logger;
  readonly metrics: Metrics;
  /** The list read differs from the one before. */
  readonly changed: (listed: Readonly<Record<string, string>>) => void;
}

/**
 * adapters.directory, kept read: at start, at every reload and every `rescanMs`. A directory that
 * cannot be read keeps the last list (counted, warned once until it reads again): a volume that
 * drops for a moment must not make every adapter unknown. Adapters added or removed are logged.
 */
export function createAdapterDirectory(deps: AdapterDirectoryDeps): AdapterDirectory {
  const { log, metrics } = deps;
  let o = deps.options.directory;
  let listed: Readonly<Record<string, string>> = {};
  let timer: NodeJS.Timeout | null = null;
  let failing = false;
  let skippedBefore = '';
  for (const outcome of ['listed', 'failed']) metrics.adapterDirectoryScans.inc({ outcome }, 0);

  async function scan(): Promise<void> {
    if (o.path === '') {
      if (Object.keys(listed).length > 0) apply({});
      return;
    }
    const from = o.listPath || o.path;
    try {
      const got = await listAdapterDirectory(from, o.path);
      metrics.adapterDirectoryScans.inc({ outcome: 'listed' });
      if (failing) log.info({ directory: from }, 'adapters.directory readable again');
      failing = false;
      const skipped = JSON.stringify(got.skipped);
      if (got.skipped.length > 0 && skipped !== skippedBefore) log.warn({ directory: from, skipped: got.skipped }, 'adapters.directory: subdirectories that are not adapters, left out');
      skippedBefore = skipped;
      apply(got.adapters);
    } catch (err) {
      metrics.adapterDirectoryScans.inc({ outcome: 'failed' });
      if (!failing) log.warn({ directory: from, err: (err as Error).message, kept: Object.keys(listed).length }, 'adapters.directory unreadable: the adapters last listed stay loadable');
      failing = true;
    }
  }

  function apply(next: Readonly<Record<string, string>>) {
    const added = Object.keys(next).filter((a) => !(a in listed));
    const removed = Object.keys(listed).filter((a) => !(a in next));
    const moved = Object.keys(next).filter((a) => a in listed && listed[a] !== next[a]);
    metrics.adapterDirectoryAdapters.set(Object.keys(next).length);
    if (added.length + removed.length + moved.length === 0) return;
    listed = next;
    log.info({ directory: o.path, added, removed, adapters: Object.keys(next).length }, 'adapters.directory listed');
    deps.changed(listed);
  }

  function schedule() {
    if (timer !== null) clearInterval(timer);
    timer = null;
    if (o.path === '' || o.rescanMs <= 0) return;
    timer = setInterval(() => void scan(), o.rescanMs);
    timer.unref();
  }

  schedule();
  return {
    scan,
    async setOptions(next) {
      o = next.directory;
      schedule();
      await scan();
    },
    listed: () => listed,
    stop() {
      if (timer !== null) clearInterval(timer);
      timer = null;
    },
  };
}
