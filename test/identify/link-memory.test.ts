import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { completionChain } from '../../src/identify/chain.js';
import { DEFAULT_IDENTITY_OPTIONS } from '../../src/identify/identity.js';
import { createPrefixIndex } from '../../src/routing/prefix-index.js';
import { ConfigSchema } from '../../src/config/schema.js';
import { defaultsOf } from '../../src/config/defaults.js';
import { prng } from '../routing/helpers.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

function retained(): number {
  gc();
  gc();
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}

const WORDS = 'the of a and to in is for on with as by at from that this it be are or an was'.split(' ');
/** ~`tokens` tokens of prose (≈ 4 bytes per token), unique per `seed`. */
function prose(seed: number, tokens: number): string {
  const rand = prng(seed);
  const out: string[] = [];
  let bytes = 0;
  while (bytes < tokens * 4) {
    const w = rand() < 0.2 ? Math.floor(rand() * 1e9).toString(36) : WORDS[Math.floor(rand() * WORDS.length)];
    out.push(w);
    bytes += w.length + 1;
  }
  return out.join(' ');
}

describe('keyless /v1/completions links: memory', () => {
  it('a link kept from a 9K-token prompt costs its own bytes, not the whole prompt\'s hex (< 200 B)', () => {
    const kept = new Map<string, number>();
    const base = prose(1, 9000);
    // Once before measuring: the kernel's memory grows to the prompt's size on its first use.
    completionChain({ model: 'm', prompt: base }, DEFAULT_IDENTITY_OPTIONS);
    const before = retained();
    const prompts = 10_000;
    for (let s = 0; s < prompts; s++) {
      // A fresh session head, so every prompt has its own links from the first block on.
      const chain = completionChain({ model: 'm', prompt: `session ${s}: ${base}` }, DEFAULT_IDENTITY_OPTIONS);
      assert.ok(chain.chain.length > 500);
      kept.set(chain.chain[chain.chain.length - 1], s);
    }
    const perLink = (retained() - before) / prompts;
    console.log(`# one kept link per 9K-token prompt: ${perLink.toFixed(0)} B each`);
    assert.equal(kept.size, prompts);
    assert.ok(perLink < 200, `${perLink.toFixed(0)} B per kept link`);
  });

  it('sessions × turns of long keyless completions keep the prefix index within its stated budget (< 100 MB at the default entries)', () => {
    // Scaled down 10× from the default bound (10,000 sessions × 30 turns): a full index of a
    // tenth of the entries must weigh under a tenth of the budget.
    const scale = 10;
    const maxEntries = defaultsOf(ConfigSchema).routing.options.prefixMaxEntries / scale;
    const sessions = 250;
    const turns = 30;
    const before = retained();
    const idx = createPrefixIndex({ maxEntries, ttlMs: 600_000 });
    // Every prompt: an ~8K-token shared preamble, then the session's own turns, ~150 new tokens
    // each (the reply and the next user line): ~10 new links a turn, ~500 the index already has.
    const preamble = prose(7, 8000);
    const tails = Array.from({ length: sessions }, (_, s) => `\nsession ${s}`);
    for (let t = 0; t < turns; t++) {
      for (let s = 0; s < sessions; s++) {
        tails[s] += `\n${prose(10_000 * t + s, 150)}`;
        const c = completionChain({ model: 'm', prompt: preamble + tails[s] }, DEFAULT_IDENTITY_OPTIONS);
        idx.record(c.chain, c.chainTokens, `replica-${s % 4}`, t * sessions + s);
      }
    }
    tails.length = 0;
    const bytes = retained() - before;
    const atDefault = bytes * scale;
    console.log(`# prefix index: ${idx.size()} entries after ${sessions}×${turns} turns, ${(bytes / 1e6).toFixed(1)} MB (${(bytes / idx.size()).toFixed(0)} B/entry) → ${(atDefault / 1e6).toFixed(0)} MB at the default ${maxEntries * scale}`);
    assert.equal(idx.size(), maxEntries, 'the traffic fills the index to its bound');
    assert.ok(atDefault < 100e6, `${(atDefault / 1e6).toFixed(0)} MB at the default ${maxEntries * scale} entries`);
  });
});
