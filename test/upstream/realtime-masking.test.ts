// The realtime relay's frames are masked and unmasked by bufferutil's native code (ws loads it when
// it can); a gateway where ws cannot says so at start rather than running slower in silence.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { nativeMasking } from '../../src/upstream/realtime-relay.js';
import { startGateway } from '../helpers/gateway.js';

const warning = (logs: Record<string, any>[]) => logs.filter((l) => l.level === 40 && /bufferutil is not loadable/.test(String(l.msg)));

describe('realtime frame masking', () => {
  it('is native in this install, and a gateway without it warns once at start', async () => {
    assert.equal(nativeMasking(), true, 'bufferutil (an optional dependency) loads');
    const quiet = await startGateway(['http://127.0.0.1:9']);
    await quiet.close();
    assert.equal(warning(quiet.logs).length, 0);
    process.env.WS_NO_BUFFER_UTIL = '1';
    try {
      assert.equal(nativeMasking(), false);
      const g = await startGateway(['http://127.0.0.1:9']);
      await g.close();
      assert.equal(warning(g.logs).length, 1);
    } finally {
      delete process.env.WS_NO_BUFFER_UTIL;
    }
  });
});
