import type { RequestIdentity } from '../identify/identity.js';
import { oneTokenBody } from './replay.js';

/** A shared prefix (system prompt + tools) as a one-token request, and how much traffic used it. */
export interface HotPrefix {
  /** The chain link ending the shared part: the agent's key in routing (routing/working-set.ts agentOf). */
  readonly key: string;
  readonly target: string;
  readonly body: Buffer;
  readonly tokens: number;
  hits: number;
}

export interface HotPrefixes {
  /** One served request: its shared prefix counts once more (cheap: a Map lookup when known). */
  seen(identity: RequestIdentity, target: string, body: Buffer): void;
  /** The k most used prefixes, most used first. */
  top(k: number): HotPrefix[];
  /** The prefixes of these agents (by key) that are known, most used first. */
  of(keys: readonly string[]): HotPrefix[];
  bytes(): number;
  size(): number;
}

// Halve every count after this many requests: yesterday's agents give way to today's.
const DECAY_EVERY = 10_000;
// Prefixes seen once, remembered by link (oldest forgotten first) until they are seen again.
const MAX_CANDIDATES = 4_096;

/**
 * The shared prefixes traffic uses most — the system messages and tools before a chat's first
 * user turn, as identified by their chain link — kept as ready-made one-token requests within a
 * memory budget. A known prefix costs one Map lookup per request. A new one is built (its body
 * parsed and the system part re-encoded) on its second sighting, so a prefix that never repeats
 * (a timestamp in the system prompt) costs no parse; past the budget the least used go first.
 */
export function createHotPrefixes(opts: { maxBytes: number }): HotPrefixes {
  const byLink = new Map<string, HotPrefix>();
  const candidates = new Set<string>();
  let bytes = 0;
  let seenSinceDecay = 0;

  function evictFor(need: number, keep: string) {
    while (bytes + need > opts.maxBytes && byLink.size > 0) {
      let worst: string | null = null;
      let hits = Infinity;
      for (const [k, p] of byLink) if (k !== keep && p.hits < hits) { hits = p.hits; worst = k; }
      if (worst === null) return;
      bytes -= byLink.get(worst)!.body.length;
      byLink.delete(worst);
    }
  }

  return {
    seen(identity, target, body) {
      if (identity.kind !== 'chat' || identity.sharedTokens <= 0 || opts.maxBytes === 0) return;
      const { chain, chainTokens } = identity;
      // The link that ends the shared part: the last message before the first user turn.
      let j = -1;
      for (let i = 0; i < chain.length && chainTokens[i] <= identity.sharedTokens; i++) j = i;
      if (j < 0 || chainTokens[j] !== identity.sharedTokens) return;
      if (++seenSinceDecay >= DECAY_EVERY) {
        seenSinceDecay = 0;
        for (const p of byLink.values()) p.hits /= 2;
      }
      const known = byLink.get(chain[j]);
      if (known !== undefined) {
        known.hits++;
        return;
      }
      if (!candidates.delete(chain[j])) {
        candidates.add(chain[j]);
        if (candidates.size > MAX_CANDIDATES) candidates.delete(candidates.values().next().value as string);
        return;
      }
      let prefix: HotPrefix;
      try {
        const parsed = JSON.parse(body.toString('utf8')) as Record<string, unknown>;
        const messages = (parsed.messages as unknown[]).slice(0, j + 1);
        prefix = { key: chain[j], target, body: oneTokenBody({ ...parsed, messages }), tokens: identity.sharedTokens, hits: 2 };
      } catch {
        return;
      }
      if (prefix.body.length > opts.maxBytes) return;
      evictFor(prefix.body.length, chain[j]);
      byLink.set(chain[j], prefix);
      bytes += prefix.body.length;
    },
    top(k) {
      return [...byLink.values()].sort((a, b) => b.hits - a.hits).slice(0, k);
    },
    of(keys) {
      const out: HotPrefix[] = [];
      for (const k of keys) {
        const p = byLink.get(k);
        if (p !== undefined) out.push(p);
      }
      return out.sort((a, b) => b.hits - a.hits);
    },
    bytes: () => bytes,
    size: () => byLink.size,
  };
}
