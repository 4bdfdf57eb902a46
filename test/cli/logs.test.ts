import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { Writable } from 'node:stream';
import { createLogger } from '../../src/telemetry/logger.js';
import { startReplica } from '../../bench/sim/index.js';
import { spawnGateway } from '../helpers/spawn-gateway.js';
import { waitFor } from '../helpers/wait.js';

describe('logs for people and machines', () => {
  it('the pretty format writes one readable line per entry: wall time, level by name, message, fields', async () => {
    let text = '';
    const sink = new Writable({ write(chunk, _enc, done) { text += chunk.toString(); done(); } });
    const log = createLogger('info', sink as never, 'pretty');
    log.warn({ replica: 'vllm-0' }, 'replica back: takes traffic again');
    log.debug('not at info');
    await waitFor('the pretty line', () => text.includes('\n'));
    assert.match(text, /^\[\d\d:\d\d:\d\d\.\d{3}\] WARN: replica back: takes traffic again \{"replica":"vllm-0"\}\n$/);
  });

  it('serve --log-format pretty logs pretty lines; the JSON default has no warning on a clean start', async () => {
    // The simulator answers what a vLLM replica does (/health, /metrics, /tokenize): a clean start.
    const replica = await startReplica();
    try {
      const args = ['--import', 'tsx', 'src/cli.ts', 'serve', '--upstream', replica.url, '--host', '127.0.0.1', '--port', '0', '--admin-host', '127.0.0.1', '--admin-port', '0', '--log-format', 'pretty'];
      const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
      const lines: string[] = [];
      createInterface({ input: child.stdout! }).on('line', (l) => lines.push(l));
      try {
        await waitFor('the listening line', () => lines.some((l) => l.includes('INFO: warmroute listening')), 30_000);
        assert.ok(lines.every((l) => !l.startsWith('{')), lines.join('\n'));
      } finally {
        child.kill('SIGTERM');
      }

      const g = await spawnGateway([replica.url]);
      try {
        // A replica slow to answer its first check on a loaded machine is news about the fleet, not
        // the start: every other warning (settings, the session-tag secret) must be absent.
        const warnings = g.logs.filter((l) => l.level >= 40 && !(l.replica !== undefined && l.cause === 'check'));
        assert.deepEqual(warnings.map((l) => l.msg), []);
      } finally {
        await g.stop();
      }
    } finally {
      await replica.close();
    }
  });

  it('a replica that never answered is "not reachable", not one whose sessions move', async () => {
    const g = await spawnGateway(['http://127.0.0.1:1']);
    try {
      await waitFor('the replica checked', () => g.logs.some((l) => l.replica === '127.0.0.1:1'), 10_000);
      const about = g.logs.filter((l) => l.replica === '127.0.0.1:1');
      assert.match(about[0].msg, /^replica not reachable: it takes no traffic until it passes its checks$/);
      assert.ok(about.every((l) => !/session/.test(l.msg)), JSON.stringify(about));
    } finally {
      await g.stop();
    }
  });
});
