// The default JSON destination (telemetry/logger.ts): lines buffered as bytes and written in large
// writes. Counted, not timed: how many writes reach the file descriptor, and that nothing measures
// the pending text per line (sonic-boom's string mode flattens its whole pending string for every
// line it is given, the cost this destination exists to avoid).

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { test } from 'node:test';

const LINES = 3000;

const child = `
import fs from 'node:fs';
const counts = { writes: 0, byteLength: 0 };
const write = fs.write;
fs.write = (...a) => { counts.writes++; return write(...a); };
const { createLogger } = await import('./src/telemetry/logger.ts');
const log = createLogger('info');
const byteLength = Buffer.byteLength;
Buffer.byteLength = (...a) => { counts.byteLength++; return byteLength(...a); };
for (let i = 0; i < ${LINES}; i++) log.info({ i, caller: 'Zoë — 東京', stream: true, ttftMs: 12.5 }, 'request');
Buffer.byteLength = byteLength;
process.on('exit', () => process.stderr.write(JSON.stringify(counts)));
`;

test('the access log: every line written whole, in UTF-8, in a few large writes; nothing re-measured per line', async () => {
  const p = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', child], { stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  createInterface({ input: p.stdout! }).on('line', (l) => lines.push(l));
  let err = '';
  p.stderr!.on('data', (c: Buffer) => { err += c.toString(); });
  const code = await new Promise<number | null>((r) => p.on('close', r));
  assert.equal(code, 0, err);
  assert.equal(lines.length, LINES);
  lines.forEach((l, i) => {
    const o = JSON.parse(l) as { i: number; caller: string; msg: string };
    assert.equal(o.i, i);
    assert.equal(o.caller, 'Zoë — 東京');
  });
  const counts = JSON.parse(err.slice(err.lastIndexOf('{'))) as { writes: number; byteLength: number };
  const bytes = lines.reduce((n, l) => n + Buffer.byteLength(l) + 1, 0);
  // One write per 32 KiB pending, the rest at exit (flushed synchronously, not through fs.write).
  assert.ok(counts.writes <= Math.ceil(bytes / 32_768) + 1, `${counts.writes} writes for ${bytes} bytes`);
  assert.equal(counts.byteLength, 0, 'the pending lines were measured again per line');
});
