import assert from 'node:assert/strict';
import { test } from 'node:test';

import { parseProbeArgs, UsageError } from '../../src/probe/args.js';
import { resolveBaseUrl } from '../../src/probe/endpoint.js';

const base = ['--base-url', 'http://h:8000', '--model', 'm'];

test('defaults', () => {
  const p = parseProbeArgs(base, {});
  assert.equal(p.help, false);
  if (p.help) return;
  assert.equal(p.json, false);
  assert.deepEqual(p.options, {
    baseUrl: 'http://h:8000',
    model: 'm',
    compareUrl: undefined,
    trials: 5,
    timeoutMs: 60000,
    maxTokens: 8,
    cases: ['tiny', 'fresh1k', 'cold5k', 'repeat9k'],
    headers: {},
  });
});

test('every flag, = form, repeated --header, cases subset in canonical order', () => {
  const p = parseProbeArgs(
    [
      ...base,
      '--compare=http://g:8080/v1',
      '--json',
      '--trials',
      '3',
      '--cases',
      'repeat9k,tiny',
      '--api-key',
      'sk-1',
      '--header',
      'X-Session-Id: s1',
      '--header',
      'x-extra:  a: b ',
      '--timeout-ms',
      '500',
      '--max-tokens=16',
    ],
    { OPENAI_API_KEY: 'from-env' },
  );
  assert.ok(!p.help);
  if (p.help) return;
  assert.equal(p.json, true);
  assert.equal(p.options.compareUrl, 'http://g:8080/v1');
  assert.equal(p.options.trials, 3);
  assert.deepEqual(p.options.cases, ['tiny', 'repeat9k']);
  assert.equal(p.options.apiKey, 'sk-1', 'flag beats env');
  assert.deepEqual(p.options.headers, { 'x-session-id': 's1', 'x-extra': 'a: b' });
  assert.equal(p.options.timeoutMs, 500);
  assert.equal(p.options.maxTokens, 16);
});

test('OPENAI_API_KEY is the fallback key', () => {
  const p = parseProbeArgs(base, { OPENAI_API_KEY: 'sk-env' });
  assert.ok(!p.help && p.options.apiKey === 'sk-env');
});

test('--help and -h', () => {
  assert.deepEqual(parseProbeArgs(['--help']), { help: true });
  assert.deepEqual(parseProbeArgs(['-h']), { help: true });
});

const bad: Array<[string[], RegExp]> = [
  [['--model', 'm'], /--base-url is required/],
  [['--base-url', 'http://h'], /--model is required/],
  [[...base, '--trials', '0'], /--trials must be a positive integer/],
  [[...base, '--trials', 'many'], /--trials must be a positive integer/],
  [[...base, '--max-tokens', '-1'], /max-tokens/],
  [[...base, '--cases', 'tiny,warm'], /unknown case 'warm'/],
  [[...base, '--cases', ','], /--cases is empty/],
  [[...base, '--header', 'no-colon'], /--header must look like 'Name: value'/],
  [[...base, '--header', ': v'], /--header must look like/],
  [[...base, '--bogus'], /unknown flag --bogus/],
  [[...base, '--trails', '3'], /unknown flag --trails; did you mean --trials\?/],
  [[...base, 'stray'], /unexpected argument "stray"/],
  [['--base-url', 'h:8000', '--model', 'm'], /--base-url: URL must be http/],
  [['--base-url', 'not a url', '--model', 'm'], /--base-url: not a valid URL/],
  [[...base, '--compare', 'ftp://x'], /--compare: URL must be http/],
];
for (const [argv, re] of bad) {
  test(`usage error: ${argv.slice(-2).join(' ')}`, () => {
    assert.throws(() => parseProbeArgs(argv, {}), (e: unknown) => e instanceof UsageError && re.test(e.message));
  });
}

test('base URL with or without /v1, trailing slash, prefix, query, full chat URL', () => {
  const cases: Array<[string, string, string]> = [
    ['http://h:8000', 'http://h:8000', '/v1/chat/completions'],
    ['http://h:8000/', 'http://h:8000', '/v1/chat/completions'],
    ['http://h:8000/v1', 'http://h:8000', '/v1/chat/completions'],
    ['http://h:8000/v1/', 'http://h:8000', '/v1/chat/completions'],
    ['https://gw.example/openai/v1', 'https://gw.example', '/openai/v1/chat/completions'],
    ['https://gw.example/openai', 'https://gw.example', '/openai/v1/chat/completions'],
    ['http://h/v1/chat/completions', 'http://h', '/v1/chat/completions'],
    ['http://h/v1?api-version=2', 'http://h', '/v1/chat/completions?api-version=2'],
  ];
  for (const [raw, origin, chat] of cases) {
    const a = resolveBaseUrl(raw);
    assert.equal(a.origin, origin, raw);
    assert.equal(a.chatPath, chat, raw);
  }
  assert.equal(resolveBaseUrl('http://h:8000/v1').modelsPath, '/v1/models');
  assert.equal(resolveBaseUrl('https://gw.example').port, 443);
  assert.equal(resolveBaseUrl('http://[::1]:9/v1').hostname, '::1');
});

test('--traces: the query API and how long to wait for the spans; --traces-wait-ms alone is a usage error', () => {
  const p = parseProbeArgs([...base, '--traces', 'http://jaeger:16686'], {});
  assert.ok(!p.help);
  if (p.help) return;
  assert.equal(p.options.tracesUrl, 'http://jaeger:16686');
  assert.equal(p.options.tracesWaitMs, 15000);
  const q = parseProbeArgs([...base, '--traces', 'http://jaeger:16686', '--traces-wait-ms', '500'], {});
  assert.equal(!q.help && q.options.tracesWaitMs, 500);
  assert.throws(() => parseProbeArgs([...base, '--traces-wait-ms', '500'], {}), (e: unknown) => e instanceof UsageError && /--traces-wait-ms needs --traces/.test(e.message));
  assert.throws(() => parseProbeArgs([...base, '--traces', 'jaeger:16686'], {}), (e: unknown) => e instanceof UsageError && /--traces/.test(e.message));
  assert.throws(() => parseProbeArgs([...base, '--trace', 'http://j'], {}), /--traces/);
});
