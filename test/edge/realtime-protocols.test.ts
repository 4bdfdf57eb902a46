// The subprotocols of a realtime upgrade: the key a browser offers among them, what goes on to the
// replica, and what the client is answered with.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { answeredProtocol, offeredProtocols } from '../../src/edge/realtime-protocols.js';

describe('realtime subprotocols', () => {
  it('takes the key out of what is offered, in the client\'s order', () => {
    assert.deepEqual(offeredProtocols(undefined), { relayed: [], key: null });
    assert.deepEqual(offeredProtocols('realtime, openai-insecure-api-key.sk-a_b-9, openai-beta.realtime-v1'), { relayed: ['realtime', 'openai-beta.realtime-v1'], key: 'sk-a_b-9' });
    assert.deepEqual(offeredProtocols('openai-insecure-api-key.k,\trealtime'), { relayed: ['realtime'], key: 'k' });
    assert.deepEqual(offeredProtocols('openai-insecure-api-key.'), { relayed: [], key: '' });
    assert.deepEqual(offeredProtocols('openai-insecure-api-keyX'), { relayed: ['openai-insecure-api-keyX'], key: null }, 'only the dotted prefix names a key');
  });

  it('refuses with a 400 what ws would refuse, and more than one key, without quoting the header', () => {
    for (const header of ['', 'a,,b', 'a,', 'a b', 'a,a', 'a;b', 'openai-insecure-api-key.x, openai-insecure-api-key.y']) {
      assert.throws(() => offeredProtocols(header), (e: { statusCode: number; message: string }) => e.statusCode === 400 && !e.message.includes('insecure-api-key.x'), JSON.stringify(header));
    }
  });

  it('answers with the replica\'s selection, else the first offered that is not a key, never a key', () => {
    const offered = new Set(['openai-insecure-api-key.k', 'realtime', 'openai-beta.realtime-v1']);
    assert.deepEqual(answeredProtocol(offered, 'openai-beta.realtime-v1'), { protocol: 'openai-beta.realtime-v1', by: 'replica' });
    assert.deepEqual(answeredProtocol(offered, ''), { protocol: 'realtime', by: 'gateway' });
    assert.deepEqual(answeredProtocol(offered, 'openai-insecure-api-key.k'), { protocol: 'realtime', by: 'gateway' });
    assert.deepEqual(answeredProtocol(offered, 'never-offered'), { protocol: 'realtime', by: 'gateway' });
    assert.equal(answeredProtocol(new Set(['openai-insecure-api-key.k']), ''), null);
  });
});
