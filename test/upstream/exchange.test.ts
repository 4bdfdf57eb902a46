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
