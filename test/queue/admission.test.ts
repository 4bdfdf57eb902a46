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
});
