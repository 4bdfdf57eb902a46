import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createRegistry, newReplica } from '../../src/fleet/registry.js';
import { createAdmission } from '../../src/queue/admission.js';
import { Shed } from '../../src/queue/limiter.js';

describe('admission per replica', () => {
  it('a request that ends after its replica left, or rejoined under the same name, does not free a slot it never held', () => {
    const [r] = createRegistry([{ name: 'r0', url: 'http://127.0.0.1:1', weight: 1 }]).replicas;
    const admission = createAdmission({ maxInflight: 1, maxQueued: 0, timeoutMs: 1_000 });
    assert.equal(admission.acquire(r), null);
    // Its drain time ran out with the request still open; the same address comes back at once.
    admission.forget(r.name);
    const back = newReplica({ name: 'r0', url: 'http://127.0.0.1:1', weight: 1 }, r.source);
    assert.equal(admission.acquire(back), null);
    admission.release(r); // the old request ends
    assert.throws(() => admission.acquire(back), (e: unknown) => e instanceof Shed, 'still one open on the new replica: at its limit');
    admission.release(back);
    assert.equal(admission.acquire(back), null);
  });

  it('a wait given up (its client left) frees its place in the queue, and a lowered limit holds while others wait', async () => {
    const [r] = createRegistry([{ name: 'r0', url: 'http://127.0.0.1:1', weight: 1 }]).replicas;
    const admission = createAdmission({ maxInflight: 2, maxQueued: 1, timeoutMs: 10_000 });
    assert.equal(admission.acquire(r), null);
    assert.equal(admission.acquire(r), null);
    const left = admission.acquire(r)!;
    assert.equal(admission.queuedOn('r0'), 1);
    admission.cancel(r, left);
    assert.equal(admission.queuedOn('r0'), 0);
    const waiting = admission.acquire(r)!;
    admission.setLimits({ maxInflight: 1, maxQueued: 1, timeoutMs: 10_000 });
    admission.release(r);
    assert.equal(admission.queuedOn('r0'), 1, 'two open under a new limit of 1: the first release lets nobody in');
    admission.release(r);
    await waiting;
    assert.equal(r.inflight, 1);
  });
});

describe('admission at shutdown', () => {
  it('closeQueues refuses every waiter now, and any later wait, even on a replica first seen after it', async () => {
    const [r, s] = createRegistry([{ name: 'r0', url: 'http://127.0.0.1:1', weight: 1 }, { name: 'r1', url: 'http://127.0.0.1:2', weight: 1 }]).replicas;
    const admission = createAdmission({ maxInflight: 1, maxQueued: 4, timeoutMs: 10_000 });
    assert.equal(admission.acquire(r), null);
    const waiting = admission.acquire(r)!;
    const closed = new Error('shutting down');
    admission.closeQueues(closed);
    await assert.rejects(waiting, (e) => e === closed);
    assert.throws(() => admission.acquire(r), (e) => e === closed);
    assert.equal(admission.acquire(s), null, 'one that fits still goes through');
    assert.throws(() => admission.acquire(s), (e) => e === closed);
    assert.equal(admission.queuedOn('r0'), 0);
  });
});
