import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SERVE_FLAGS, schemaAt } from '../../src/config/flags.js';
import { ConfigError, loadConfig, misspelledEnv } from '../../src/config/load.js';

function cli(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['--import', 'tsx', 'src/cli.ts', ...args], { timeout: 30_000, env: { PATH: process.env.PATH, ...env } }, (err, stdout, stderr) => {
      resolve({ code: (err as { code?: number } | null)?.code ?? 0, stdout, stderr });
    });
  });
}

function problems(raw: string): string[] {
  const dir = mkdtempSync(join(tmpdir(), 'warmroute-cli-'));
  const file = join(dir, 'c.yaml');
  writeFileSync(file, raw);
  try {
    loadConfig({ config: file }, {});
  } catch (e) {
    if (e instanceof ConfigError) return e.problems;
    throw e;
  }
  return [];
}

describe('the command line', () => {
  it('--version prints the package version', async () => {
    const { code, stdout } = await cli(['--version']);
    assert.equal(code, 0);
    assert.equal(stdout.trim(), JSON.parse(readFileSync('package.json', 'utf8')).version);
  });

  it('serve --help lists every flag with its default and environment variable, from the schema', async () => {
    const { code, stdout } = await cli(['serve', '--help']);
    assert.equal(code, 0);
    for (const spec of SERVE_FLAGS) {
      const name = 'flag' in spec ? `--${spec.flag} ${spec.arg}` : spec.env;
      const at = stdout.indexOf(`  ${name} `);
      assert.ok(at >= 0, `${name} is listed`);
      const entry = stdout.slice(at, stdout.indexOf('\n', stdout.indexOf('\n', at) + 1));
      if ('flag' in spec) assert.match(entry, new RegExp(`env ${spec.env}`));
      const schema = 'path' in spec ? schemaAt(spec.path) : undefined;
      if (schema && 'default' in schema) assert.ok(entry.includes(`default ${JSON.stringify(schema.default)}`), `${name}: ${entry}`);
    }
    assert.match(stdout, /--strategy NAME\s+routing strategy: affinity \| round-robin \| least-loaded \| session-hash/);
    const probe = await cli(['probe', '--help']);
    assert.equal(probe.code, 0);
    assert.match(probe.stdout, /--base-url URL/);
  });

  it('docs/cli.md names every flag and environment variable of serve', () => {
    const doc = readFileSync('docs/cli.md', 'utf8');
    for (const spec of SERVE_FLAGS) {
      if ('flag' in spec) assert.ok(doc.includes(`\`--${spec.flag} ${spec.arg}`), `--${spec.flag} in docs/cli.md`);
      assert.ok(doc.includes(`\`${spec.env}\``), `${spec.env} in docs/cli.md`);
    }
  });

  it('an unknown flag is one line naming the nearest valid one, exit 2, no stack trace', async () => {
    const { code, stderr } = await cli(['serve', '--stratgy', 'affinity']);
    assert.equal(code, 2);
    assert.match(stderr, /^warmroute serve: unknown flag --stratgy; did you mean --strategy\?\n/);
    assert.doesNotMatch(stderr, /TypeError|    at /);
    const missing = await cli(['serve', '--port']);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /--port needs a value/);
  });

  it('bad values name the flag and the allowed values; a /v1 upstream is told to drop it', async () => {
    const { code, stderr } = await cli(['serve', '--upstream', 'http://h:8000/v1', '--strategy', 'sticky', '--log-level', 'verbose', '--redis', 'localhost:6379']);
    assert.equal(code, 2);
    assert.match(stderr, /--upstream: drop "\/v1".*\(http:\/\/h:8000\)/);
    assert.match(stderr, /--strategy: "sticky" is not one of affinity, round-robin, least-loaded, session-hash/);
    assert.match(stderr, /--log-level: "verbose" is not one of fatal, error, warn, info, debug, trace, silent/);
    assert.match(stderr, /--redis: expected redis:\/\/host:port.*for one server: redis:\/\/localhost:6379/);
    assert.doesNotMatch(stderr, /Expected union value|\^\(/);
    const env = await cli(['serve', '--upstream', 'http://h:8000'], { WARMROUTE_STRATEGY: 'sticky' });
    assert.match(env.stderr, /^warmroute: invalid configuration: WARMROUTE_STRATEGY: "sticky" is not one of/);
  });

  it('config-file errors say "did you mean" for a misspelled setting', () => {
    const found = problems('upstreams:\n  - url: http://a:1\n    nmae: a\nlimts: {}\ntimeouts:\n  headerMs: 5\nrouting:\n  strategy: stiky\n');
    assert.deepEqual(found.sort(), [
      '/limts: unknown setting "limts"; did you mean "limits"?',
      '/routing/strategy: "stiky" is not one of affinity, round-robin, least-loaded, session-hash',
      '/timeouts/headerMs: unknown setting "headerMs"; did you mean "headersMs"?',
      '/upstreams/0/nmae: unknown setting "nmae"; did you mean "name"?',
    ]);
    assert.match(problems('upstreams:\n  - url: http://a:1\nzzzzzz: 1\n')[0], /unknown setting "zzzzzz"; the settings here are listen, admin,/);
  });

  it('a port in use is one line naming the flag, exit 1', async () => {
    const holder = createServer();
    await new Promise<void>((r) => holder.listen(0, '127.0.0.1', r));
    const port = (holder.address() as { port: number }).port;
    try {
      const { code, stderr } = await cli(['serve', '--upstream', 'http://127.0.0.1:1', '--host', '127.0.0.1', '--port', String(port), '--admin-host', '127.0.0.1', '--admin-port', '0']);
      assert.equal(code, 1);
      assert.equal(stderr, `warmroute: cannot listen on 127.0.0.1:${port}: another process is listening there (choose another with --port)\n`);
    } finally {
      holder.close();
    }
  });
});

describe('config files that cannot be read', () => {
  it('a YAML syntax error and a missing file are one line each', () => {
    const dir = mkdtempSync(join(tmpdir(), 'warmroute-cli-'));
    const file = join(dir, 'bad.yaml');
    writeFileSync(file, 'upstreams:\n  - url: http://a:1\nlimits: {bodyBytes: 1\n');
    assert.throws(() => loadConfig({ config: file }, {}), (e: Error) => /at line \d+, column \d+$/.test(e.message) && !e.message.includes('\n'));
    assert.throws(() => loadConfig({ config: join(dir, 'none.yaml') }, {}), (e: Error) => e.message === `invalid configuration: cannot read config file ${join(dir, 'none.yaml')}: no such file`);
  });
});

describe('environment variables', () => {
  it('a WARMROUTE_ name close to a setting is named with the setting it likely meant; other tools\' names are left alone', () => {
    const found = misspelledEnv({ WARMROUTE_STRATEGIE: 'x', WARMROUTE_LOG_LEVLE: 'debug', WARMROUTE_PORT: '1', WARMROUTE_CACHE: '/tmp', WARMROUTE_PEERS_VENV: '/v', PATH: '/bin' });
    assert.deepEqual(found, [{ name: 'WARMROUTE_STRATEGIE', meant: 'WARMROUTE_STRATEGY' }, { name: 'WARMROUTE_LOG_LEVLE', meant: 'WARMROUTE_LOG_LEVEL' }]);
  });
});
