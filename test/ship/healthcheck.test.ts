// `warmroute healthcheck` finds the admin port the way `serve` does (flag > WARMROUTE_* > file >
// default) and answers 0 only for a 200 from /healthz. The container run is in dockerfile.test.ts.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { adminFlags, healthcheck, healthzUrl, serveArgsOf } from '../../src/healthcheck.js';

const dir = mkdtempSync(join(tmpdir(), 'warmroute-healthcheck-'));
after(() => rmSync(dir, { recursive: true, force: true }));

describe('warmroute healthcheck', () => {
  it('reads the serve flags of a warmroute command line, and nothing from any other', () => {
    const cmdline = (...argv: string[]) => `${argv.join('\0')}\0`; // as /proc/PID/cmdline holds it
    assert.deepEqual(serveArgsOf(cmdline('node', 'dist/cli.js', 'serve', '--admin-port', '9999')), ['--admin-port', '9999']);
    assert.deepEqual(serveArgsOf(cmdline('node', '/app/node_modules/.bin/warmroute', 'serve')), []);
    assert.equal(serveArgsOf(cmdline('/sbin/init', 'splash')), null);
    assert.equal(serveArgsOf(cmdline('node', 'dist/cli.js', 'probe', '--base-url', 'x')), null);
  });

  it('follows the admin port from a flag, then WARMROUTE_ADMIN_PORT, then the config file, then the default', () => {
    const file = join(dir, 'wr.yaml');
    writeFileSync(file, 'upstreams: [{ url: "http://10.0.0.1:8000" }]\nadmin: { host: 10.1.2.3, port: 7001 }\n');
    const url = (args: string[], env: NodeJS.ProcessEnv = {}) => healthzUrl(adminFlags(args), env);
    assert.equal(url(['--config', file]), 'http://10.1.2.3:7001/healthz');
    assert.equal(url(['--config', file], { WARMROUTE_ADMIN_PORT: '7002' }), 'http://10.1.2.3:7002/healthz');
    assert.equal(url([`--config=${file}`, '--admin-port=7003', '--strategy', 'round-robin'], { WARMROUTE_ADMIN_PORT: '7002' }), 'http://10.1.2.3:7003/healthz');
    assert.equal(url([], { WARMROUTE_CONFIG: file }), 'http://10.1.2.3:7001/healthz');
    // Replicas it cannot see (WARMROUTE_UPSTREAM of another process) do not stop it.
    assert.equal(url([]), 'http://127.0.0.1:9090/healthz');
    assert.equal(url(['--admin-host', '::', '--admin-port', '7004']), 'http://[::1]:7004/healthz');
  });

  it('exits 0 for a 200 from /healthz, 1 for anything else or no answer', async () => {
    let status = 200;
    const server = createServer((req, res) => { res.statusCode = req.url === '/healthz' ? status : 404; res.end(); });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    try {
      const args = ['--admin-host', '127.0.0.1', '--admin-port', String(port)];
      assert.equal(await healthcheck(args, {}), 0);
      status = 503;
      assert.equal(await healthcheck(args, {}), 1);
    } finally {
      await new Promise((r) => server.close(r));
    }
    assert.equal(await healthcheck(['--admin-host', '127.0.0.1', '--admin-port', String(port)], {}), 1, 'nothing listens');
    assert.equal(await healthcheck(['--admin-port', 'nope'], {}), 1, 'a bad port is unhealthy, not a crash');
  });
});
