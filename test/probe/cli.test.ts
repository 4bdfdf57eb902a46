import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { after, test } from 'node:test';

import { probeMain } from '../../src/probe/index.js';
import { closedPort, startFixture, type Fixture } from './fixture.js';

const open: Fixture[] = [];
after(() => Promise.all(open.map((f) => f.close())));

function sink(): { stream: PassThrough; text(): string } {
  const stream = new PassThrough();
  const parts: Buffer[] = [];
  stream.on('data', (c: Buffer) => parts.push(c));
  return { stream, text: () => Buffer.concat(parts).toString('utf8') };
}

async function run(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const out = sink();
  const err = sink();
  const code = await probeMain(argv, out.stream, err.stream);
  return { code, out: out.text(), err: err.text() };
}

test('--help prints usage with every contract flag and exits 0', async () => {
  const r = await run(['--help']);
  assert.equal(r.code, 0);
  for (const flag of ['--base-url', '--model', '--compare', '--json', '--trials', '--api-key', '--header', '--cases', '--timeout-ms', '--max-tokens']) {
    assert.ok(r.out.includes(flag), flag);
  }
});

test('usage error: message on stderr, exit 2, nothing on stdout', async () => {
  const r = await run(['--model', 'm']);
  assert.equal(r.code, 2);
  assert.match(r.err, /--base-url is required/);
  assert.equal(r.out, '');
});

test('connection refused: clear message, exit 2', async () => {
  const port = await closedPort();
  const r = await run(['--base-url', `http://127.0.0.1:${port}/v1`, '--model', 'm', '--trials', '1']);
  assert.equal(r.code, 2);
  assert.match(r.err, new RegExp(`cannot connect to http://127.0.0.1:${port}.*connection refused`));
  assert.equal(r.out, '');
});

test('--json: one machine-readable object with per-case, per-endpoint results', async () => {
  const a = await startFixture({ behave: () => ({ cachedTokens: 16 }) });
  const b = await startFixture({ behave: () => ({ cachedTokens: null, firstContentDelayMs: 20 }) });
  open.push(a, b);
  const r = await run([
    '--base-url', a.url, '--compare', `${b.url}/v1`, '--model', 'm', '--json',
    '--trials', '2', '--cases', 'tiny,repeat9k', '--api-key', 'sk-secret', '--header', 'x-session-id: s1',
  ]);
  assert.equal(r.code, 0, r.err);
  const j = JSON.parse(r.out);
  assert.equal(j.model, 'm');
  assert.equal(j.trials, 2);
  assert.equal(j.maxTokens, 8);
  assert.equal(j.ok, true);
  assert.deepEqual(j.endpoints.map((e: { label: string }) => e.label), ['A', 'B']);
  assert.equal(j.endpoints[1].chatUrl, `${b.url}/v1/chat/completions`);
  assert.equal(typeof j.endpoints[0].tcpConnectMs.median, 'number');
  assert.equal(j.endpoints[0].connections, 1);
  assert.deepEqual(
    j.rows.map((x: { case: string; send: string }) => `${x.case}/${x.send}`),
    ['tiny/only', 'repeat9k/first', 'repeat9k/second'],
  );
  const tiny = j.rows[0];
  assert.equal(tiny.approxPromptTokens, 30);
  assert.deepEqual(Object.keys(tiny.results[0].ttftMs).sort(), ['max', 'median', 'min', 'n', 'p90']);
  assert.equal(tiny.results[0].cachedTokens, 16);
  assert.equal(tiny.results[1].cachedTokens, null, 'absent cached_tokens stays null, not 0');
  assert.equal(typeof tiny.results[0].promptTokens, 'number');
  assert.equal(tiny.results[0].samples.length, 2);
  assert.equal(typeof tiny.compare.ratio, 'number');
  assert.equal(typeof tiny.compare.diffMs, 'number');
  assert.ok(!r.out.includes('sk-secret'), 'credentials never reach the output');
});

test('table: rows per case and endpoint, B/A columns, cached tokens, failures listed', async () => {
  const a = await startFixture({ behave: (i) => (i === 0 ? { status: 429, errorBody: '{"error":{"message":"slow down"}}' } : { cachedTokens: 7 }) });
  const b = await startFixture({ behave: () => ({ firstContentDelayMs: 30, cachedTokens: 0 }) });
  open.push(a, b);
  const r = await run(['--base-url', a.url, '--compare', b.url, '--model', 'm', '--trials', '2', '--cases', 'tiny,repeat9k', '--timeout-ms', '5000']);
  assert.equal(r.code, 0, r.err);
  const lines = r.out.split('\n');
  assert.ok(lines.some((l) => /^case\s+~tokens\s+ep\s+ok\s+median\s+p90\s+min\s+max\s+prompt\s+cached\s+B\/A\s+B−A ms$/.test(l)), r.out);
  assert.ok(lines.some((l) => /^tiny\s+30\s+A\s+1\/2\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+\d+\s+7$/.test(l)), r.out);
  assert.ok(lines.some((l) => /^\s+B\s+2\/2(\s+[\d.]+){4}\s+\d+\s+0\s+[\d.]+x\s+\+[\d.]+$/.test(l)), r.out);
  assert.ok(lines.some((l) => l.startsWith('repeat9k 1st (cold)')), r.out);
  assert.ok(lines.some((l) => l.startsWith('repeat9k 2nd (warm)')), r.out);
  assert.match(r.out, /A tiny: 1 of 2 failed\n\s+HTTP 429: slow down/);
  assert.match(r.out, /tcp connect median [\d.]+ ms/);
});

test('exit 1 when a case produced no successful trial', async () => {
  const f = await startFixture({ behave: () => ({ status: 500 }) });
  open.push(f);
  const r = await run(['--base-url', f.url, '--model', 'm', '--trials', '1', '--cases', 'tiny']);
  assert.equal(r.code, 1);
  assert.match(r.out, /some cases produced no successful trial/);
  assert.match(r.out, /HTTP 500: fixture failure/);
});
