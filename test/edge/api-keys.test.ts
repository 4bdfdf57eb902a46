import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { createKeyring, type ClientKey } from '../../src/edge/api-keys.js';
import { memoryLogger } from '../store/redis-server.js';
import { waitFor } from '../helpers/wait.js';

const sha = (k: string) => createHash('sha256').update(k).digest('hex');

describe('client API keys from a file', () => {
  it('a reload that renames a key or changes its limit keeps counting the requests already open under it', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'warmroute-keys-')), 'keys.yaml');
    writeFileSync(file, `- { sha256: ${sha('sk-1')}, name: voice, maxConcurrent: 2 }\n`);
    const { log } = memoryLogger();
    const keyring = createKeyring({ keys: [], file, log });
    try {
      const open = keyring.check('Bearer sk-1') as ClientKey;
      open.open++; // as the pipeline does while the request is open
      // Written again until it is seen: the file watcher takes its first look at the file in the
      // background, and a write before that look is its starting point, not a change.
      let writes = 0;
      let lastWrite = -Infinity;
      await waitFor('the reload', () => {
        if ((keyring.check('Bearer sk-1') as ClientKey).name === 'voice-agents') return true;
        if (performance.now() - lastWrite < 500) return false;
        lastWrite = performance.now();
        writeFileSync(file, `- { sha256: ${sha('sk-1')}, name: voice-agents, maxConcurrent: 3 }\n${'#'.repeat(++writes)}\n`);
        return false;
      }, 10_000);
      const after = keyring.check('Bearer sk-1') as ClientKey;
      assert.equal(after.maxConcurrent, 3);
      assert.equal(after.open, 1, 'the open request still counts');
      open.open--; // it ends, through the object it was admitted with
      assert.equal(after.open, 0, 'and its slot comes back to the count new requests are checked against');
    } finally {
      keyring.close();
    }
  });
});
