import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { defaultsOf } from '../../src/config/defaults.js';
import { ConfigError, loadConfig, performanceWarnings, resolveConfig } from '../../src/config/load.js';
import { ConfigSchema } from '../../src/config/schema.js';

function tmpYaml(text: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'warmroute-cfg-'));
  const file = join(dir, 'c.yaml');
  writeFileSync(file, text);
  return file;
}

describe('configuration', () => {
  it('the example config is valid and documents every top-level key', () => {
    const c = loadConfig({ config: 'config/warmroute.example.yaml' }, {});
    assert.equal(c.upstreams[0].name, 'vllm-0');
    assert.equal(c.routing.strategy, 'affinity');
    assert.ok(Object.isFrozen(c) && Object.isFrozen(c.upstreams[0]));
  });

  it('the example config shows exactly the defaults, every one of them (it says "the values shown are the defaults")', () => {
    const example = parseYaml(readFileSync('config/warmroute.example.yaml', 'utf8')) as Record<string, unknown>;
    assert.match(readFileSync('config/warmroute.example.yaml', 'utf8'), /the values shown are the\s+#?\s*defaults/);
    const { upstreams: _, ...shown } = example;
    assert.deepEqual(shown, defaultsOf(ConfigSchema));
  });

  it('defaults: host 0.0.0.0, port 8080, admin 9090, affinity; replica name = host:port', () => {
    const c = loadConfig({ upstream: ['http://10.0.0.5:8000'] }, {});
    assert.equal(c.listen.host, '0.0.0.0');
    assert.equal(c.listen.port, 8080);
    assert.equal(c.admin.port, 9090);
    assert.equal(c.routing.strategy, 'affinity');
    assert.equal(c.upstreams[0].name, '10.0.0.5:8000');
    assert.equal(c.timeouts.connectMs, 2000);
    assert.equal(c.timeouts.headersMs, 30000);
    assert.equal(c.timeouts.idleMs, 60000);
    assert.equal(c.limits.maxRetries, 2);
    assert.equal(c.limits.bodyBytes, 16 * 1024 * 1024);
  });

  it('precedence: flag > environment > file > defaults', () => {
    const file = tmpYaml('listen: { port: 1111 }\nadmin: { port: 2222 }\nrouting: { strategy: least-loaded }\nupstreams: [{ url: "http://file:1" }]\n');
    const env = { WARMROUTE_PORT: '3333', WARMROUTE_UPSTREAM: 'http://env:1, http://env:2', WARMROUTE_STRATEGY: 'round-robin' };
    const c = loadConfig({ config: file, port: '4444' }, env);
    assert.equal(c.listen.port, 4444); // flag over env over file
    assert.equal(c.admin.port, 2222); // file over default
    assert.equal(c.routing.strategy, 'round-robin'); // env over file
    assert.deepEqual(c.upstreams.map((u) => u.name), ['env:1', 'env:2']); // env over file
    const d = loadConfig({ config: file, upstream: ['http://flag:9'] }, env);
    assert.deepEqual(d.upstreams.map((u) => u.name), ['flag:9']);
    assert.equal(loadConfig({}, { WARMROUTE_CONFIG: file }).listen.port, 1111);
  });

  it('reports every problem at once, each with its path', () => {
    const file = tmpYaml([
      'listen: { port: 99999 }',
      'upstreams:',
      '  - url: "ftp://x"',
      '  - url: "http://a:1"',
      '    weight: -1',
      'routing: { strategy: random, options: { loadFactor: 0.5, bogus: 1 } }',
      'timeouts: { connectMs: "fast" }',
      'nonsense: true',
    ].join('\n'));
    try {
      loadConfig({ config: file }, {});
      assert.fail('should have thrown');
    } catch (e) {
      assert.ok(e instanceof ConfigError);
      const text = e.problems.join('\n');
      for (const path of ['/listen/port', '/upstreams/0/url', '/upstreams/1/weight', '/routing/strategy', '/timeouts/connectMs']) {
        assert.ok(text.includes(path), `missing ${path} in:\n${text}`);
      }
      assert.match(text, /nonsense|additional/i);
    }
    assert.throws(() => resolveConfig({ upstreams: [{ url: 'http://a:1' }], routing: { options: { loadFactor: 0.5, bogus: 1 } } }), (e: ConfigError) =>
      e.problems.some((p) => p.includes('/routing/options/bogus')) && e.problems.some((p) => p.includes('loadFactor')));
    assert.throws(() => resolveConfig({ upstreams: [{ url: 'http://a:1' }, { url: 'http://a:1' }] }), /duplicate replica name/);
    assert.throws(() => resolveConfig({ upstreams: [{ url: 'dns://vllm.ns.svc:8000', tls: { caFile: 'ca.pem' } }] }), (e: ConfigError) =>
      e.problems.some((p) => p.startsWith('/upstreams/0/tls: not supported on a dns:// upstream')));
    assert.throws(() => loadConfig({}, {}), /no upstream replicas/);
  });

  it('warns about settings that cost latency or visibility', () => {
    assert.deepEqual(performanceWarnings(loadConfig({ upstream: ['http://a:1'] }, {})), []);
    const w = performanceWarnings(loadConfig({ upstream: ['http://a:1'], strategy: 'round-robin' }, {}));
    assert.equal(w.length, 1);
    assert.match(w[0], /affinity is OFF/);
  });

  it('the CLI exits 2 and prints every problem for a bad config', async () => {
    const { code, stderr } = await new Promise<{ code: number; stderr: string }>((resolve) => {
      execFile(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'serve', '--upstream', 'nope', '--port', 'x'], { timeout: 20_000 }, (err, _out, stderr) => {
        resolve({ code: (err as { code?: number } | null)?.code ?? 0, stderr });
      });
    });
    assert.equal(code, 2);
    // Each problem names the flag it came from.
    assert.match(stderr, /--upstream: expected http:\/\/host:port/);
    assert.match(stderr, /--port: expected an integer 0–65535 \(got "x"\)/);
  });
});
