import type { RequestIdentity } from '../identify/identity.js';

/** A keyed session's last prompt, as received: what a drain replays to the session's next replica. */
export interface LastPrompt {
  /** Origin-form target it was sent to (`/v1/chat/completions`, ...). */
  readonly target: string;
  /** The exact bytes received (the buffer the request arrived in: kept, not copied). */
  readonly body: Buffer;
  /** Its identity, for the router to pick the session's next replica. */
  readonly identity: RequestIdentity;
}

export interface LastPrompts {
  keep(key: string, p: LastPrompt): void;
  get(key: string): LastPrompt | undefined;
  readonly bytes: () => number;
  readonly size: () => number;
}

/**
 * Bounded two ways: a prompt over `maxPromptBytes` is not kept (its session moves cold), and past
 * `maxTotalBytes` the least recently served sessions are forgotten first. One Map re-insert per
 * keyed request; the body is the buffer the request already owns.
 */
export function createLastPrompts(opts: { maxPromptBytes: number; maxTotalBytes: number }): LastPrompts {
  const kept = new Map<string, LastPrompt>();
  let bytes = 0;
  return {
    keep(key, p) {
      const prev = kept.get(key);
      if (prev !== undefined) {
        kept.delete(key);
        bytes -= prev.body.length;
      }
      if (p.body.length > opts.maxPromptBytes) return;
      kept.set(key, p);
      bytes += p.body.length;
      while (bytes > opts.maxTotalBytes) {
        const [oldest, o] = kept.entries().next().value as [string, LastPrompt];
        kept.delete(oldest);
        bytes -= o.body.length;
      }
    },
    get: (key) => kept.get(key),
    bytes: () => bytes,
    size: () => kept.size,
  };
}
