import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';
import type { ReplicaState } from '../../src/fleet/registry.js';
import { createAdmission } from '../../src/queue/admission.js';
import { createLimiter } from '../../src/queue/limiter.js';
import { createExchangeOwner } from '../../src/upstream/exchange.js';

/** A response as the owner sees it: closes, finished or not. */
function fakeRes() {
  const res = new EventEmitter() as EventEmitter & { writableFinished: boolean };
  res.writableFinished = false;
  return res as unknown as ServerResponse & { writableFinished: boolean };
}

function setup() {
  const admission = createAdmission({ maxInflight: 1, maxQueued: 4, timeoutMs: 10_000 });
  const global = createLimiter({ max: 1, maxQueued: 4, timeoutMs: 10_000, what: 'gateway' });
  const replica = { name: 'r1', inflight: 0 } as ReplicaState;
  const reports: string[] = [];
  const gone: (string | null)[] = [];
  const res = fakeRes();
  const owner = createExchangeOwner<string>(res, { admission, global, report: (e) => reports.push(e), aborted: () => 'aborted', clientGone: (r) => gone.push(r) }, undefined);
  return { admission, global, replica, reports, gone, res, owner };
}

describe('the exchange owner', () => {
  it('gives every slot back exactly once, however often the end is reached', () => {
    const { admission, global, replica, reports, res, owner } = setup();
    const key = { open: 0 };
    owner.holdKey(key);
    assert.equal(global.acquire(), null);
    owner.holdGlobal();
    assert.equal(admission.acquire(replica), null);
    owner.holdReplica(replica);
    let aborted = 0;
    owner.upstream(() => { aborted++; });
    assert.deepEqual([key.open, global.open, replica.inflight], [1, 1, 1]);
    assert.equal(owner.end('complete'), true);
    assert.equal(owner.end('failed'), false);
    res.emit('close');
    assert.deepEqual([key.open, global.open, replica.inflight], [0, 0, 0]);
    assert.deepEqual(reports, ['complete'], 'one report');
    assert.equal(aborted, 1, 'the open upstream request was aborted once');
  });

  it('a client gone before any stage took over is reported aborted; slots granted afterwards go straight back', () => {
    const { admission, global, replica, reports, gone, res, owner } = setup();
    const key = { open: 0 };
    owner.holdKey(key);
    res.emit('close');
    assert.deepEqual(reports, ['aborted']);
    assert.deepEqual(gone, [null]);
    assert.equal(key.open, 0);
    assert.equal(global.acquire(), null);
    assert.equal(owner.holdGlobal(), false);
    assert.equal(global.open, 0, 'a gateway-wide slot granted after the end is released');
    assert.equal(admission.acquire(replica), null);
    assert.equal(owner.holdReplica(replica), false);
    assert.equal(replica.inflight, 0, 'so is a replica slot');
  });

  it('a failover gives the first replica\'s slot back before the next is held, and the stage\'s own client-gone handling runs', () => {
    const { admission, replica, reports, res, owner } = setup();
    const other = { name: 'r2', inflight: 0 } as ReplicaState;
    admission.acquire(replica);
    owner.holdReplica(replica);
    owner.releaseReplica();
    admission.acquire(other);
    owner.holdReplica(other);
    assert.deepEqual([replica.inflight, other.inflight], [0, 1]);
    owner.onClientGone(() => owner.end('aborted by forward'));
    res.emit('close');
    assert.deepEqual(reports, ['aborted by forward']);
    assert.equal(other.inflight, 0);
  });

  it('the stall timer fires once unless stopped, and never after the end', async () => {
    const { owner } = setup();
    let fired = 0;
    owner.stall(20, () => { fired++; });
    owner.stall(20, null);
    await new Promise((r) => setTimeout(r, 40));
    assert.equal(fired, 0);
    owner.stall(20, () => { fired++; });
    owner.end('complete');
    await new Promise((r) => setTimeout(r, 40));
    assert.equal(fired, 0);
  });
});

describe('the exchange owner, when its report throws', () => {
  it('has given every slot back, and is counted as settled so a drain does not wait on it', async () => {
    const admission = createAdmission({ maxInflight: 1, maxQueued: 4, timeoutMs: 10_000 });
    const global = createLimiter({ max: 1, maxQueued: 4, timeoutMs: 10_000, what: 'gateway' });
    const replica = { name: 'r1', inflight: 0 } as ReplicaState;
    let settled = 0;
    const owner = createExchangeOwner<string>(fakeRes(), { admission, global, report: () => { throw new Error('recorder bug'); }, settled: () => { settled++; }, aborted: () => 'aborted', clientGone: () => {} }, undefined);
    const key = { open: 0 };
    owner.holdKey(key);
    global.acquire();
    owner.holdGlobal();
    admission.acquire(replica);
    owner.holdReplica(replica);
    assert.throws(() => owner.end('complete'), /recorder bug/);
    assert.deepEqual([key.open, global.open, replica.inflight], [0, 0, 0]);
    assert.equal(settled, 1, 'settled once');
  });
});

describe('the exchange owner’s hold on a managed adapter', () => {
  function withHolds() {
    const admission = createAdmission({ maxInflight: 4, maxQueued: 4, timeoutMs: 10_000 });
    const global = createLimiter({ max: 4, maxQueued: 4, timeoutMs: 10_000, what: 'gateway' });
    const held = new Map<string, number>();
    const adapters = {
      hold: (r: string, a: string) => held.set(`${r}/${a}`, (held.get(`${r}/${a}`) ?? 0) + 1),
      release: (r: string, a: string) => held.set(`${r}/${a}`, (held.get(`${r}/${a}`) ?? 0) - 1),
    };
    const res = fakeRes();
    const owner = createExchangeOwner<string>(res, { admission, global, report: () => undefined, aborted: () => 'aborted', clientGone: () => undefined, adapters }, undefined);
    const counts = () => Object.fromEntries([...held].filter(([, n]) => n !== 0));
    return { admission, owner, res, counts };
  }
  const replica = (name: string) => ({ name, inflight: 0 }) as ReplicaState;

  it('is given back once at the end, however it ends', () => {
    for (const ending of ['end', 'client gone', 'end twice']) {
      const { owner, res, counts } = withHolds();
      assert.equal(owner.holdAdapter('r1', 'a'), true);
      assert.deepEqual(counts(), { 'r1/a': 1 });
      if (ending === 'client gone') res.emit('close');
      else owner.end('complete');
      if (ending === 'end twice') owner.end('failed');
      res.emit('close');
      assert.deepEqual(counts(), {}, ending);
      assert.equal(owner.holdAdapter('r1', 'a'), false, 'nothing is held after the end');
      assert.deepEqual(counts(), {}, ending);
    }
  });

  it('follows the exchange to the replica it fails over to', () => {
    const { admission, owner, counts } = withHolds();
    const r1 = replica('r1');
    const r2 = replica('r2');
    owner.holdAdapter('r1', 'a');
    assert.equal(admission.acquire(r1), null);
    owner.holdReplica(r1);
    assert.deepEqual(counts(), { 'r1/a': 1 });
    assert.equal(admission.acquire(r2), null);
    owner.holdReplica(r2);
    assert.deepEqual(counts(), { 'r2/a': 1 });
    owner.end('complete');
    assert.deepEqual(counts(), {});
  });
});
