import { watch, type FSWatcher } from 'node:fs';
import { basename, dirname } from 'node:path';

// Editors and ConfigMap updates write a file in several steps (truncate + write, or a rename):
// one reload once they are done.
const SETTLE_MS = 200;

/**
 * Calls `changed` once a config file has changed and settled. Watches the folder, not the file: a
 * file replaced by a rename (vim, Kubernetes ConfigMap symlink swaps) keeps being noticed.
 */
export function watchConfigFile(path: string, changed: () => void, unwatchable: (err: Error) => void): { close(): void } {
  const name = basename(path);
  let timer: NodeJS.Timeout | null = null;
  let watcher: FSWatcher | null = null;
  try {
    watcher = watch(dirname(path), { persistent: false }, (_event, file) => {
      if (file !== null && file !== name && !String(file).startsWith('..')) return;
      if (timer) clearTimeout(timer);
      timer = setTimeout(() => { timer = null; changed(); }, SETTLE_MS);
      timer.unref();
    });
  } catch (e) {
    unwatchable(e as Error);
    return { close() {} };
  }
  return {
    close() {
      if (timer) clearTimeout(timer);
      watcher?.close();
    },
  };
}
