import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { test } from 'node:test';
import { freePort } from '../../bench/lib/procs.js';
import { ExitedBeforeListening, waitForPort } from '../../bench/overhead/targets.js';

test('waiting for a port fails at once, with its output, when the process meant to listen there has exited', async () => {
  const port = await freePort();
  const proc = spawn(process.execPath, ['-e', 'console.error("cannot listen on 127.0.0.1:1: another process is listening there"); process.exit(1)'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  proc.stderr.on('data', (d: Buffer) => { output += d.toString(); });
  const t0 = Date.now();
  await assert.rejects(waitForPort(port, 30_000, { proc, output: () => output }), (e: unknown) => {
    assert.ok(e instanceof ExitedBeforeListening);
    assert.match(e.message, /exited \(code 1, signal null\) before it listened.*\n.*another process is listening/);
    return true;
  });
  assert.ok(Date.now() - t0 < 20_000, 'long before the bound');
});
