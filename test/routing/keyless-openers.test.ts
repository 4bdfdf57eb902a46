// Two keyless callers who open with the same words ("Hello?") to the same agent: their first turns
// are the same bytes (one shared cached prefix), from their second utterance on they are two
// conversations — two conversation records, two cooldowns, two sessions of caller turns.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { RequestIdentity } from '../../src/identify/identity.js';
import { createTurns } from '../../src/record/turns.js';
import { createRouter } from '../../src/routing/router.js';
import type { Router } from '../../src/routing/types.js';
import { CONVERSATION_KEY } from '../../src/store/types.js';
import { createMetrics } from '../../src/telemetry/metrics.js';
import { startClock } from '../../src/telemetry/hop-clock.js';
import { chatIdentity, fleet, prng, store, words } from './helpers.js';

const SYSTEM = words(800, prng(41));
type Msg = { role: string; content: string };
const opener: Msg[] = [{ role: 'system', content: SYSTEM }, { role: 'user', content: 'Hello?' }];
/** Caller `who`'s prompt at turn `turn` (1-based): the same opener, then words of their own. */
function prompt(who: string, turn: number): Msg[] {
  const out = [...opener];
  for (let t = 2; t <= turn; t++) out.push({ role: 'assistant', content: `Hello, how can I help? (${who} ${t})` }, { role: 'user', content: `${who} asks about order ${t * 17}` });
  return out;
}

describe('keyless callers who open with the same words are two conversations', () => {
  it('two records, each on its own replica with its own cooldown: a second gateway follows each caller to its own', () => {
    let clock = 5_000_000;
    const replicas = fleet(4);
    const shared = store();
    const options = { spillCooldownMs: 10_000 };
    const a = createRouter('affinity', { store: shared, now: () => clock, random: prng(1), options });
    const b = createRouter('affinity', { store: shared, now: () => clock, random: prng(2), options });
    const send = (r: Router, identity: RequestIdentity) => {
      const d = r.route({ identity, replicas });
      r.served(identity, { replica: d.ranked[0].name, result: 'ok', replicaTtftMs: null, promptTokens: null, cachedTokens: null });
      return d.ranked[0].name;
    };
    const first = send(a, chatIdentity(prompt('ann', 1)));
    assert.equal(send(a, chatIdentity(prompt('bob', 1))), first, 'the same opening bytes: one warm prefix, one replica');
    clock += 1_000;
    const annHome = send(a, chatIdentity(prompt('ann', 2)));
    // Bob's second turn finds his replica down: he moves.
    const down = replicas.find((r) => r.name === annHome)!;
    down.up = false;
    clock += 1_000;
    const bobHome = send(a, chatIdentity(prompt('bob', 2)));
    down.up = true;
    assert.notEqual(bobHome, annHome);

    const ann = chatIdentity(prompt('ann', 3));
    const bob = chatIdentity(prompt('bob', 3));
    assert.notEqual(ann.conversationKey, bob.conversationKey);
    assert.equal(ann.placementKey, bob.placementKey, 'still one placement key: the shared cached prefix');
    const annRecord = shared.get(CONVERSATION_KEY + ann.conversationKey, clock)!;
    const bobRecord = shared.get(CONVERSATION_KEY + bob.conversationKey, clock)!;
    assert.equal(annRecord.replica, annHome);
    assert.equal(bobRecord.replica, bobHome);
    assert.ok(annRecord.since < bobRecord.since, "Bob's move does not restart Ann's cooldown");
    // Gateway b has seen neither: it follows each record, Ann's to her replica, not to Bob's.
    clock += 1_000;
    assert.equal(send(b, ann), annHome, "Ann's third turn, through another gateway");
    assert.equal(send(b, bob), bobHome, "Bob's third turn, through another gateway");
  });

  it('caller turns: one turn for the shared opening, then each caller\'s own, counted once', () => {
    const turns = createTurns({ enabled: true, idleMs: 60_000, budgetMs: 1_000, maxSessions: 100, keep: 10 }, createMetrics({ defaultMetrics: false }));
    try {
      let at = 1_000;
      const call = (messages: Msg[]) => {
        const clock = startClock(at);
        const placed = turns.arrived(chatIdentity(messages), clock);
        Object.assign(clock, { sent: at + 1, firstToken: at + 5, ended: at + 9 });
        at += 20;
        return placed === null ? null : turns.ended(placed, clock, null);
      };
      call(prompt('ann', 1));
      call(prompt('bob', 1));
      const got: Record<string, number[]> = { ann: [], bob: [] };
      for (let t = 2; t <= 4; t++) {
        for (const who of ['ann', 'bob'] as const) got[who].push(call(prompt(who, t))!.turn);
      }
      // Interleaved, Ann's and Bob's utterances would close each other's turns if they were one session.
      assert.deepEqual(got, { ann: [1, 2, 3], bob: [1, 2, 3] });
      const annKey = chatIdentity(prompt('ann', 4)).conversationKey!;
      const bobKey = chatIdentity(prompt('bob', 4)).conversationKey!;
      const annTurns = turns.lastTurns(annKey)!;
      const bobTurns = turns.lastTurns(bobKey)!;
      assert.deepEqual(annTurns.turns.map((x) => x.index), [0, 1, 2]);
      assert.deepEqual(bobTurns.turns.map((x) => x.index), [0, 1, 2]);
      assert.deepEqual(annTurns.open, { index: 3, calls: 1 });
      assert.equal(annTurns.turns[0].calls, 2, 'the shared opening: one turn of both calls (the same bytes)');
    } finally {
      turns.close();
    }
  });
});
