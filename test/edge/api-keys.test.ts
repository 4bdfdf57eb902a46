import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { closeSync, mkdtempSync, openSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { request } from 'undici';
import { createKeyring, type ClientKey } from '../../src/edge/api-keys.js';
import { memoryLogger } from '../store/redis-server.js';
import { waitFor } from '../helpers/wait.js';
import { startFixture, type FixtureUpstream } from '../helpers/fixture-upstream.js';
import { chatBody, startGateway, type TestGateway } from '../helpers/gateway.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

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
        if (performance.now() - lastWrite < 2_500) return false; // past the settle time (API_KEYS_SETTLE_MS)
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

describe('client API keys from a file that is emptied or caught mid-write (issue 17 #12)', () => {
  const keys = (...names: string[]) => names.map((n) => `- { sha256: ${sha(`sk-${n}`)}, name: ${n} }\n`).join('');
  let a: FixtureUpstream;
  let g: TestGateway;
  let file: string;
  before(async () => {
    file = join(mkdtempSync(join(tmpdir(), 'warmroute-keys-')), 'keys.yaml');
    writeFileSync(file, keys('a', 'b'));
    a = await startFixture('a');
    g = await startGateway([a.url], { auth: { apiKeysFile: file } });
  });
  after(async () => { await g.close(); await a.close(); });
  const status = async (key: string) => {
    const res = await request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer sk-${key}` }, body: chatBody({ stream: false }) });
    await res.body.text();
    return res.statusCode;
  };
  const rejected = async (reason: string) => {
    const text = await (await request(`${g.adminUrl}/metrics`)).body.text();
    const m = text.match(new RegExp(`^warmroute_api_keys_file_rejected_total\\{reason="${reason}"\\} (\\d+)`, 'm'));
    return m ? Number(m[1]) : 0;
  };

  it('a file written in place, piece by piece, is never applied half-way: every key keeps working throughout', async () => {
    assert.equal(await status('a'), 200);
    assert.equal(await status('b'), 200);
    // The new list adds c; the writer truncates the file and writes it one entry at a time, 600 ms
    // apart (less than the settle time), so for 1.2 s — longer than a poll of the file — it holds
    // no key, then a without b.
    const pieces = [keys('a'), keys('b'), keys('c')];
    const fd = openSync(file, 'w');
    const failures: string[] = [];
    let writing = true;
    const client = (async () => {
      while (writing) {
        for (const k of ['a', 'b']) {
          const s = await status(k);
          if (s !== 200) failures.push(`sk-${k}: ${s}`);
        }
        await sleep(30);
      }
    })();
    try {
      for (const p of pieces) {
        await sleep(600);
        writeSync(fd, p);
      }
    } finally {
      closeSync(fd);
      writing = false;
    }
    await client;
    assert.deepEqual(failures, [], 'a key in force was refused while the file was being written');
    await waitFor('the new key, once the file settled', async () => (await status('c')) === 200, 5_000);
    assert.equal(await status('a'), 200);
  });

  it('an emptied file keeps the keys in force, loudly (warning + metric)', async () => {
    const before = await rejected('empty');
    writeFileSync(file, '');
    await waitFor('the empty read counted', async () => (await rejected('empty')) > before, 5_000);
    assert.equal(await status('a'), 200, 'still in force');
    assert.equal(await status('c'), 200);
    assert.equal(await status('nobody'), 401);
    assert.ok(g.logs.some((l) => l.level === 40 && l.reason === 'empty'), 'a warning says why');
    writeFileSync(file, keys('b'));
    await waitFor('a real change applies again', async () => (await status('a')) === 401, 5_000);
    assert.equal(await status('b'), 200);
  });
});
