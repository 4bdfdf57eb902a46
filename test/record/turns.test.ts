// record/turns.ts on its own: the bounds on what it keeps (sessions, closed turns per session,
// response ids), so a gateway following millions of sessions holds no more than configured.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { chatChain } from '../../src/identify/chain.js';
import { DEFAULT_IDENTITY_OPTIONS, type RequestIdentity } from '../../src/identify/identity.js';
import { createTurns } from '../../src/record/turns.js';
import { startClock } from '../../src/telemetry/hop-clock.js';
import { createMetrics } from '../../src/telemetry/metrics.js';

function identity(key: string | null, messages: Record<string, unknown>[]): RequestIdentity {
  const c = chatChain({ model: 'm', messages }, DEFAULT_IDENTITY_OPTIONS);
  return {
    kind: 'chat', model: 'm', sessionKey: key, sessionKeySource: key ? 'header:x-session-id' : null, chain: c.chain, seed: c.seed,
    firstUser: c.firstUser, chainTokens: c.chainTokens, promptTokens: c.promptTokens, placementKey: c.placementKey, conversationKey: c.conversationKey, sharedTokens: c.sharedTokens,
    lastUser: c.lastUser, utterance: c.utterance, storedResponseId: null, storesResponse: false,
  };
}

function oneCall(turns: ReturnType<typeof createTurns>, id: RequestIdentity, at: number, responseId: string | null = null) {
  const clock = startClock(at);
  const call = turns.arrived(id, clock);
  Object.assign(clock, { sent: at + 1, firstToken: at + 5, ended: at + 9 });
  return call === null ? null : turns.ended(call, clock, responseId);
}

const OPTS = { enabled: true, idleMs: 1_000, budgetMs: 250, maxSessions: 2, keep: 3 };

test('sessions past turns.maxSessions: the least recently active one goes, its open turn closed as evicted', async () => {
  const metrics = createMetrics({ defaultMetrics: false });
  const turns = createTurns(OPTS, metrics);
  try {
    const u = (s: string) => [{ role: 'system', content: 'sys' }, { role: 'user', content: s }];
    oneCall(turns, identity('a', u('hi')), 10);
    oneCall(turns, identity('b', u('hi')), 20);
    oneCall(turns, identity('c', u('hi')), 30);
    assert.equal(turns.lastTurns('a'), null);
    assert.ok(turns.lastTurns('b') && turns.lastTurns('c'));
    assert.match(await metrics.registry.metrics(), /warmroute_turns_total\{closed="evicted"\} 1/);
  } finally {
    turns.close();
  }
});

test('closed turns kept per session: turns.keep, the latest', () => {
  const turns = createTurns(OPTS, createMetrics({ defaultMetrics: false }));
  try {
    for (let i = 0; i < 6; i++) oneCall(turns, identity('k', [{ role: 'user', content: `utterance ${i}` }]), 100 * i);
    const v = turns.lastTurns('k')!;
    assert.deepEqual(v.turns.map((t) => t.index), [2, 3, 4]);
    assert.deepEqual(v.open, { index: 5, calls: 1 });
    assert.equal(v.turns[0].waitMs, 5);
    assert.equal(v.turns[0].llmMs, 8);
  } finally {
    turns.close();
  }
});

test('response ids followed to their session: bounded by turns.maxSessions', () => {
  const turns = createTurns(OPTS, createMetrics({ defaultMetrics: false }));
  try {
    const base = identity(null, [{ role: 'user', content: 'first' }]);
    const placement = base.placementKey!;
    oneCall(turns, base, 0, 'resp_1');
    const follow = (prev: string, content: string | null): RequestIdentity => ({
      ...identity(null, content === null ? [] : [{ role: 'user', content }]), kind: 'responses', storedResponseId: prev, placementKey: null, conversationKey: null, chain: [],
    });
    assert.deepEqual(oneCall(turns, follow('resp_1', 'second'), 50, 'resp_2'), { turn: 1, call: 0 });
    assert.deepEqual(oneCall(turns, follow('resp_2', null), 60, 'resp_3'), { turn: 1, call: 1 });
    assert.equal(turns.lastTurns(placement)!.open!.calls, 2);
    // Two more ids push resp_1 out: a follow-up to it is no longer tied to its session.
    oneCall(turns, follow('resp_3', 'third'), 70, 'resp_4');
    assert.equal(oneCall(turns, follow('resp_1', 'late'), 80), null);
  } finally {
    turns.close();
  }
});

test('calls per turn: a dashboard\'s histogram_quantile reads whole calls (bucket bounds between integers)', async () => {
  const { bucketQuantile } = await import('../../bench/dashboard/promql.js');
  const metrics = createMetrics({ defaultMetrics: false });
  const turns = createTurns({ ...OPTS, maxSessions: 100 }, metrics);
  try {
    for (let i = 0; i < 4; i++) oneCall(turns, identity('q', [{ role: 'user', content: `u${i}` }]), 100 * i);
    const h = (await metrics.turnCalls.get()).values.filter((v) => v.metricName === 'warmroute_turn_calls_bucket');
    const buckets = h.map((v) => ({ le: v.labels.le === '+Inf' ? Infinity : Number(v.labels.le), count: v.value }));
    assert.equal(bucketQuantile(0.5, buckets), 1);
  } finally {
    turns.close();
  }
});
