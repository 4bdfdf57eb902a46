// What the router believes of a request it has sent but not yet seen served: its prefix is on its
// replica from the moment it is sent (learner.ts), and a completion's prompt that opens with a
// prefix already warm somewhere is placed with it (working-set.ts agentOfPlacement).

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { identify } from '../../src/identify/identity.js';
import { HOME_SLACK_SESSIONS } from '../../src/routing/placement.js';
import { createRouter } from '../../src/routing/router.js';
import { agentOfPlacement, WARM_AGENT } from '../../src/routing/working-set.js';
import { fleet, opts, prng, store, words } from './helpers.js';

const SYSTEM = words(900, prng(7));
const completion = (prompt: string, key: string | null = null) =>
  identify('completion', { model: 'm', prompt, max_tokens: 16 }, key === null ? {} : { 'x-session-id': key }, opts);

function setup(n: number, capacity: number | null = null) {
  const replicas = fleet(n, { kvCapacityTokens: capacity });
  const router = createRouter('affinity', { store: store(), now: () => 1_000_000, random: prng(3) });
  return { replicas, router };
}

describe('a request in flight', () => {
  it('a second caller of the same prompt, sent before the first is served, joins the first\'s replica', () => {
    const { replicas, router } = setup(4);
    const first = completion(`${SYSTEM} first question about my bill`);
    const second = completion(`${SYSTEM} second question about a refund`);
    const a = router.route({ identity: first, replicas });
    const b = router.route({ identity: second, replicas });
    assert.equal(b.ranked[0].name, a.ranked[0].name);
    assert.equal(b.reason, 'prefix');
    assert.ok(b.matchedTokens > 0.8 * first.promptTokens);
  });

  it('a failed attempt takes its belief back: nothing is left of it, and the next caller is placed afresh', () => {
    const { replicas, router } = setup(2);
    const first = completion(`${SYSTEM} first`);
    const a = router.route({ identity: first, replicas });
    router.served(first, { replica: a.ranked[0].name, result: 'error', replicaTtftMs: null, promptTokens: null, cachedTokens: null });
    assert.equal((router as Required<typeof router>).stats().prefixEntries, 0);
    assert.notEqual(router.route({ identity: completion(`${SYSTEM} second`), replicas }).reason, 'prefix');
  });

  it('served on another replica than the one it was sent to (a retry): the belief moves with it', () => {
    const { replicas, router } = setup(2);
    const first = completion(`${SYSTEM} first`);
    const a = router.route({ identity: first, replicas });
    const other = replicas.find((r) => r.name !== a.ranked[0].name)!.name;
    router.served(first, { replica: other, result: 'ok', replicaTtftMs: 300, promptTokens: null, cachedTokens: null });
    assert.equal(router.route({ identity: completion(`${SYSTEM} second`), replicas }).ranked[0].name, other);
  });

  it('a belief already held before the request is kept when the request fails', () => {
    const { replicas, router } = setup(2);
    const first = completion(`${SYSTEM} first`);
    const a = router.route({ identity: first, replicas });
    router.served(first, { replica: a.ranked[0].name, result: 'ok', replicaTtftMs: 300, promptTokens: null, cachedTokens: null });
    const second = completion(`${SYSTEM} second`);
    const b = router.route({ identity: second, replicas });
    assert.equal(b.ranked[0].name, a.ranked[0].name);
    router.served(second, { replica: b.ranked[0].name, result: 'error', replicaTtftMs: null, promptTokens: null, cachedTokens: null });
    const third = router.route({ identity: completion(`${SYSTEM} third`), replicas });
    assert.equal(third.ranked[0].name, a.ranked[0].name);
    assert.equal(third.reason, 'prefix');
  });
});

describe('a completion\'s agent, learnt from what is warm', () => {
  it('stands for the agent when the warm prefix covers 30% of the prompt, at the longest warm chain link', () => {
    const id = completion(`${SYSTEM} a question`);
    assert.equal(agentOfPlacement(id, new Map()), null);
    const most = id.chainTokens[Math.floor(id.chainTokens.length / 2)];
    const agent = agentOfPlacement(id, new Map([['r0', 10], ['r1', most + 1]]));
    assert.ok(agent !== null && agent.key.startsWith(WARM_AGENT));
    assert.equal(agent.tokens, most);
    assert.equal(agentOfPlacement(id, new Map([['r1', 0.2 * id.promptTokens]])), null, 'a fifth of the prompt is someone else\'s opening, not a shared prompt');
  });

  it('a chat request keeps its declared agent', () => {
    const chat = identify('chat', { model: 'm', messages: [{ role: 'system', content: SYSTEM }, { role: 'user', content: 'hi' }] }, {}, opts);
    assert.ok(!agentOfPlacement(chat, new Map([['r0', chat.promptTokens]]))?.key.startsWith(WARM_AGENT));
  });

  it('keyed sessions of one completions agent are placed together while every replica has room (within the growth slack)', () => {
    // Capacity known (placement for the sessions' growth), room for everything: the agent's
    // replica takes sessions while it holds no more than HOME_SLACK_SESSIONS beyond the emptiest.
    const { replicas, router } = setup(4, 1_000_000);
    const homes = new Set<string>();
    for (let s = 0; s < 1 + HOME_SLACK_SESSIONS; s++) {
      const id = completion(`${SYSTEM} caller ${s} opens with words of their own`, `call-${s}`);
      const d = router.route({ identity: id, replicas });
      router.served(id, { replica: d.ranked[0].name, result: 'ok', replicaTtftMs: 300, promptTokens: null, cachedTokens: null });
      homes.add(d.ranked[0].name);
    }
    assert.equal(homes.size, 1, `sessions on ${[...homes].join(', ')}`);
  });
});
