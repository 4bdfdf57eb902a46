import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isWarmrouteError } from '../../src/errors.js';
import { DEFAULT_IDENTITY_OPTIONS, identify, identityWithoutBody, type RequestIdentity } from '../../src/identify/identity.js';
import { createRouter } from '../../src/routing/router.js';
import type { StateLostReason } from '../../src/routing/types.js';
import { fleet, prng, store } from './helpers.js';

const respIdentity = (input: unknown, extra: Record<string, unknown> = {}, headers: Record<string, string> = {}): RequestIdentity =>
  identify('responses', { model: 'm', instructions: 'be brief', input, ...extra }, headers, DEFAULT_IDENTITY_OPTIONS);

function setup(strategy: 'affinity' | 'round-robin' = 'affinity', onLostState: 'error' | 'forward' = 'error') {
  let clock = 1_000_000;
  const replicas = fleet(4);
  const lost: [StateLostReason, string | null][] = [];
  const router = createRouter(strategy, {
    store: store(), now: () => clock, random: prng(3),
    responses: { store: store(), onLostState, onStateLost: (reason, replica) => lost.push([reason, replica]) },
  });
  /** Serves a request on the replica routing chose; its response gets `responseId`. */
  const serve = (identity: RequestIdentity, responseId: string | null, result: 'ok' | 'error' | 'interrupted' = 'ok') => {
    const d = router.route({ identity, replicas });
    router.served(identity, { replica: d.ranked[0].name, result, replicaTtftMs: 50, promptTokens: 900, cachedTokens: 0, responseId });
    return d;
  };
  return { replicas, router, serve, lost, tick: (ms: number) => (clock += ms) };
}

describe('stored responses: a request that continues one goes to the replica holding it', () => {
  it('every follow-up, keyless, goes to the holder as pinned, ranked alone, even far past its load cap', () => {
    const { replicas, router, serve, lost } = setup();
    const first = serve(respIdentity('hello'), 'resp_1');
    const holder = first.ranked[0];
    // Far past the hard cap: any other request would spill; this one has nowhere else to go.
    (holder as { inflight: number }).inflight = 500;
    for (let turn = 2; turn <= 6; turn++) {
      const d = serve(respIdentity(`turn ${turn}`, { previous_response_id: `resp_${turn - 1}` }), `resp_${turn}`);
      assert.equal(d.reason, 'pinned');
      assert.deepEqual(d.ranked.map((r) => r.name), [holder.name], 'no failover to a replica without the state');
    }
    assert.equal(router.storedResponse('resp_6')?.replica, holder.name);
    assert.equal(router.stats().responseRecords, 6);
    assert.deepEqual(lost, []);
    // GET /v1/responses/{id} and friends: the id from the path.
    const byPath = router.route({ identity: identityWithoutBody({}, DEFAULT_IDENTITY_OPTIONS, 'resp_3'), replicas });
    assert.deepEqual([byPath.reason, byPath.ranked.map((r) => r.name)], ['pinned', [holder.name]]);
  });

  it('the holder wins over the session pin of the same key (the pin follows)', () => {
    const { router, serve } = setup();
    serve(respIdentity('a', {}, { 'x-session-id': 'k' }), null);
    const pinned = router.session('k')!.replica;
    // A response stored on another replica than the session's pin.
    let other = serve(respIdentity('b', { prompt_cache_key: 'other-0' }), 'resp_elsewhere');
    for (let i = 1; other.ranked[0].name === pinned && i < 1000; i++) other = serve(respIdentity('b', { prompt_cache_key: `other-${i}` }), 'resp_elsewhere');
    assert.notEqual(other.ranked[0].name, pinned, 'no key in 1000 was placed off the pin');
    const d = serve(respIdentity('c', { previous_response_id: 'resp_elsewhere' }, { 'x-session-id': 'k' }), 'resp_c');
    assert.equal(d.ranked[0].name, other.ranked[0].name);
    assert.equal(router.session('k')!.replica, other.ranked[0].name);
  });

  it('only responses served whole, with store not false, are recorded', () => {
    const { router, serve } = setup();
    serve(respIdentity('x', { store: false }), 'resp_unstored');
    serve(respIdentity('x'), 'resp_failed', 'error');
    serve(respIdentity('x'), 'resp_broken', 'interrupted');
    for (const id of ['resp_unstored', 'resp_failed', 'resp_broken']) assert.equal(router.storedResponse(id), null, id);
    serve(respIdentity('x'), 'resp_whole');
    assert.ok(router.storedResponse('resp_whole'), 'a response served whole with store unset is recorded');
  });

  const gone: [StateLostReason, string, (r: { up: boolean; draining: boolean }) => void][] = [
    ['down', 'is down', (r) => { r.up = false; }],
    ['draining', 'is draining', (r) => { r.draining = true; }],
  ];
  for (const [reason, words, make] of gone) {
    it(`its holder ${reason}: a 409 response_state_lost naming the replica and the cause, never retried, counted`, () => {
      const { replicas, router, serve, lost } = setup();
      const holder = serve(respIdentity('hello'), 'resp_1').ranked[0];
      make(replicas.find((r) => r.name === holder.name)!);
      assert.throws(() => router.route({ identity: respIdentity('more', { previous_response_id: 'resp_1' }), replicas }), (e: unknown) => {
        assert.ok(isWarmrouteError(e));
        assert.equal(e.statusCode, 409);
        assert.equal(e.openaiCode, 'response_state_lost');
        assert.equal(e.param, 'previous_response_id');
        assert.ok(e.message.includes(`replica ${holder.name}, which ${words}`), e.message);
        assert.deepEqual(e.headers, ['x-should-retry', 'false']);
        return true;
      });
      assert.deepEqual(lost, [[reason, holder.name]]);
    });
  }

  it('its holder restarted: what it stored before its new process started is gone (409, reason restarted); what it stored since is pinned there', () => {
    const { replicas, router, serve, lost, tick } = setup();
    const holder = serve(respIdentity('hello'), 'resp_old').ranked[0];
    tick(1_000);
    const restartedAt = tick(0);
    tick(500);
    // Stored on the new process before the gateway's scrape noticed the restart.
    let since = serve(respIdentity('fresh', { prompt_cache_key: 'fresh-0' }), 'resp_new');
    for (let i = 1; since.ranked[0].name !== holder.name && i < 1000; i++) since = serve(respIdentity('fresh', { prompt_cache_key: `fresh-${i}` }), 'resp_new');
    assert.equal(since.ranked[0].name, holder.name, 'no key in 1000 was placed on the holder');
    tick(500);
    router.replicaRestarted(holder.name, restartedAt);
    assert.throws(() => router.route({ identity: respIdentity('more', { previous_response_id: 'resp_old' }), replicas }), (e: unknown) => {
      assert.ok(isWarmrouteError(e));
      assert.equal(e.statusCode, 409);
      assert.equal(e.openaiCode, 'response_state_lost');
      assert.ok(e.message.includes(`replica ${holder.name}, which has restarted since`), e.message);
      return true;
    });
    assert.deepEqual(lost, [['restarted', holder.name]]);
    const d = router.route({ identity: respIdentity('more', { previous_response_id: 'resp_new' }), replicas });
    assert.deepEqual([d.reason, d.ranked.map((r) => r.name)], ['pinned', [holder.name]]);
    // A restart seen again later (an older start time cannot move the line back).
    router.replicaRestarted(holder.name, restartedAt - 10_000);
    assert.equal(router.route({ identity: respIdentity('more', { previous_response_id: 'resp_new' }), replicas }).reason, 'pinned');
  });

  it('its holder removed from the fleet: the same error, reason removed', () => {
    const { replicas, router, serve, lost } = setup();
    const holder = serve(respIdentity('hello'), 'resp_1').ranked[0];
    const rest = replicas.filter((r) => r.name !== holder.name);
    assert.throws(() => router.route({ identity: respIdentity('more', { previous_response_id: 'resp_1' }), replicas: rest }), (e: unknown) => {
      assert.ok(isWarmrouteError(e));
      assert.equal(e.statusCode, 409);
      assert.equal(e.openaiCode, 'response_state_lost');
      assert.match(e.message, /no longer in the fleet/);
      return true;
    });
    assert.deepEqual(lost, [['removed', holder.name]]);
  });

  it('onLostState forward: the usual decision among the replicas left, as a failover, counted', () => {
    const { replicas, router, serve, lost } = setup('affinity', 'forward');
    const holder = serve(respIdentity('hello'), 'resp_1').ranked[0];
    replicas.find((r) => r.name === holder.name)!.up = false;
    const d = router.route({ identity: respIdentity('more', { previous_response_id: 'resp_1' }), replicas });
    assert.equal(d.reason, 'failover');
    assert.ok(!d.ranked.some((r) => r.name === holder.name));
    assert.deepEqual(lost, [['down', holder.name]]);
  });

  it('an id never seen is routed as usual (the replica answers its own 404), and counted as unknown', () => {
    const { replicas, router, lost } = setup();
    const d = router.route({ identity: respIdentity('more', { previous_response_id: 'resp_from_elsewhere' }), replicas });
    assert.equal(d.reason, 'placed');
    assert.equal(d.ranked.length, replicas.length);
    assert.deepEqual(lost, [['unknown', null]]);
  });

  it('records expire after their TTL', () => {
    const { router, serve, tick } = setup();
    serve(respIdentity('hello'), 'resp_1');
    tick(3_600_000);
    assert.ok(router.storedResponse('resp_1'), 'kept for the whole TTL');
    tick(1);
    assert.equal(router.storedResponse('resp_1'), null);
  });

  it('round-robin (a baseline) ignores stored responses: it spreads follow-ups, as the gateways it stands for do', () => {
    const { replicas, router, serve, lost } = setup('round-robin');
    serve(respIdentity('hello'), 'resp_1');
    const seen = new Set<string>();
    for (let i = 0; i < 4; i++) {
      const d = router.route({ identity: respIdentity('more', { previous_response_id: 'resp_1' }), replicas });
      assert.equal(d.reason, 'round-robin');
      seen.add(d.ranked[0].name);
    }
    assert.equal(seen.size, 4);
    assert.equal(router.storedResponse('resp_1'), null);
    assert.deepEqual(lost, []);
  });
});
