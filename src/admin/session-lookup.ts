import { CONVERSATION_KEY, isConversationKey, type SessionStore } from '../store/types.js';
import type { SessionTagger } from '../telemetry/session-tag.js';

/** A session found from the tag a log line shows: its pin's store key and the key drift and turns use. */
export interface TaggedSession {
  /** The pin's key in the session store (a keyless conversation's carries CONVERSATION_KEY). */
  readonly storeKey: string;
  /** The session key, or a keyless conversation's placement key: what drift and turns are kept under. */
  readonly key: string;
  readonly keyless: boolean;
}

export type SessionLookup = (tag: string) => TaggedSession | null;

/** What a log line's `session` or `conversation` field holds (telemetry/session-tag.ts). */
export const looksLikeTag = (s: string) => /^[0-9a-f]{12}$/.test(s);

/**
 * Finds the live pin whose key tags to `tag`: the access line shows a session tag (keyed) or a
 * conversation tag (keyless, the placement key's), never the key, so the admin API takes either.
 * No reverse map is kept (it would cost memory per session for an operator's occasional look):
 * each lookup tags the live pins' keys, about a second per million pins.
 */
export function createSessionLookup(deps: {
  store: Pick<SessionStore, 'keys'>;
  tag: SessionTagger;
  now?: () => number;
}): SessionLookup {
  const now = deps.now ?? Date.now;
  return (tag) => {
    if (!looksLikeTag(tag)) return null;
    const t = now();
    for (const storeKey of deps.store.keys?.(t) ?? []) {
      const keyless = isConversationKey(storeKey);
      const key = keyless ? storeKey.slice(CONVERSATION_KEY.length) : storeKey;
      if (deps.tag(key) === tag) return { storeKey, key, keyless };
    }
    return null;
  };
}
