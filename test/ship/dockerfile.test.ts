// The container, without a container engine: the Dockerfile read as data for what only the file
// can say (base image, stages, user, ports, exec forms), then the image's own command run the way
// the image runs it (container.ts): its layout, a clean environment, node as PID 1, a read-only
// root filesystem, the Dockerfile's USER — and the image's HEALTHCHECK command run against it.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { resolveConfig } from '../../src/config/load.js';
import { startFixture, type FixtureUpstream } from '../helpers/fixture-upstream.js';
import { freePort } from '../store/redis-server.js';
import { waitFor } from '../sim/helpers.js';
import { IMAGE_PATH, imageLayout, procStatus, rootReadOnly, runContained, sandboxUnavailable, type ImageUser } from './container.js';
import { execForm, healthcheckCommand, instructionsOf, parseDockerfile } from './dockerfile.js';

const df = parseDockerfile('Dockerfile');
const build = df.stages[0];
const final = df.final;
const one = (keyword: string) => {
  const all = instructionsOf(final, keyword);
  assert.equal(all.length, 1, `the runtime stage has one ${keyword}`);
  return all[0];
};
const entrypoint = execForm(one('ENTRYPOINT').args);
const cmd = execForm(one('CMD').args);
const healthCmd = healthcheckCommand(one('HEALTHCHECK'));
/** The runtime stage's USER (uid[:gid], numeric: checked below), whom the image's command is run as. */
const [userUid, userGid = userUid] = one('USER').args.trim().split(':');
const user: ImageUser = { uid: Number(userUid), gid: Number(userGid) };
const defaults = resolveConfig({ upstreams: [{ url: 'http://x:1' }] });
/** The Dockerfile without its comments (which may well name what the instructions avoid). */
const code = df.text.split('\n').filter((l) => !/^\s*#/.test(l)).join('\n');
const env = Object.fromEntries(instructionsOf(final, 'ENV').map((e) => e.args.split('=', 2) as [string, string]));

describe('Dockerfile', () => {
  it('runs a supported Node LTS pinned to one release, the same in every stage', () => {
    for (const s of df.stages) {
      const m = /^node:(\d+)\.(\d+)\.(\d+)-[a-z]+(-slim)?$/.exec(s.image);
      assert.ok(m, `${s.image}: node:MAJOR.MINOR.PATCH-<distro>`);
      // 20 reached end of life in April 2026; odd majors are never LTS.
      assert.ok([22, 24].includes(Number(m[1])), `${s.image} is not Node 22 or 24 LTS`);
    }
    assert.equal(new Set(df.stages.map((s) => s.image)).size, 1, 'one Node release in both stages');
  });

  it('builds in its own stage through `prepare` and ships only a production node_modules, with no npm run at runtime', () => {
    assert.ok(df.stages.length >= 2);
    assert.ok(build.name, 'the build stage is named');
    const runs = instructionsOf(build, 'RUN').map((r) => r.args).join(' && ');
    assert.match(runs, /\bnpm ci\b/);
    assert.match(runs, /\bnpm prune --omit=dev\b/);
    assert.doesNotMatch(code, /--ignore-scripts/, 'no workaround for the prepare build');
    // The build stage has what `prepare` compiles from.
    const copied = instructionsOf(build, 'COPY').map((c) => c.args).join(' ');
    for (const f of ['package.json', 'package-lock.json', 'tsconfig.json', 'src']) assert.match(copied, new RegExp(`\\b${f}\\b`));
    const pkg = JSON.parse(readFileSync('package.json', 'utf8'));
    assert.match(pkg.scripts.prepare, /tsc -p tsconfig\.json/);
    assert.equal(JSON.parse(readFileSync('tsconfig.json', 'utf8')).compilerOptions.outDir, 'dist');
    // The runtime stage: copies from the build stage, runs nothing.
    assert.deepEqual(instructionsOf(final, 'RUN'), [], 'no RUN (no npm) in the runtime stage');
    const fromBuild = instructionsOf(final, 'COPY').filter((c) => c.flags.from === build.name).map((c) => c.args.split(/\s+/)[0]);
    assert.deepEqual(fromBuild.sort(), ['/app/dist', '/app/node_modules', '/app/package.json']);
    assert.deepEqual(instructionsOf(final, 'COPY').filter((c) => c.flags.from !== build.name), [], 'nothing from the build context (no example config)');
  });

  it('runs as a non-root numeric user and exposes the schema\'s ports', () => {
    const [uid, gid] = one('USER').args.trim().split(':');
    assert.match(uid, /^\d+$/, 'numeric, so Kubernetes runAsNonRoot can verify it');
    assert.notEqual(Number(uid), 0);
    assert.notEqual(Number(gid ?? uid), 0);
    assert.deepEqual(one('EXPOSE').args.trim().split(/\s+/).map(Number).sort(), [defaults.listen.port, defaults.admin.port].sort());
    assert.deepEqual(instructionsOf(final, 'VOLUME'), [], 'nothing to write: no volume needed');
  });

  it('node is PID 1 running dist/cli.js (exec form, no shell, no npm), and the default command names no config file', () => {
    assert.deepEqual(entrypoint, ['node', 'dist/cli.js']);
    assert.deepEqual(JSON.parse(readFileSync('package.json', 'utf8')).bin.warmroute, 'dist/cli.js');
    assert.deepEqual(cmd, ['serve']);
    assert.doesNotMatch(code, /warmroute\.example\.yaml|--config/);
    assert.equal(one('STOPSIGNAL').args.trim(), 'SIGTERM');
  });

  it('HEALTHCHECK asks the image\'s own CLI (`healthcheck`), which finds the admin port as the gateway does (the -slim image has no curl)', () => {
    assert.ok(healthCmd, 'exec form');
    assert.deepEqual(healthCmd, [...entrypoint!, 'healthcheck']);
    assert.doesNotMatch(code, /\bcurl\b|\bwget\b/);
    assert.ok(one('HEALTHCHECK').flags.interval && one('HEALTHCHECK').flags.timeout);
  });
});

/** The HEALTHCHECK as Docker runs it: in the container's PID and mount namespaces (the gateway is PID 1), as its USER, with its environment. */
function healthInside(dir: string, pid: number, containerEnv: Record<string, string>): number | null {
  return spawnSync('nsenter', ['-t', String(pid), '-p', '-m', `--wd=${dir}`, '--', 'setpriv', '--reuid', String(user.uid), '--regid', String(user.gid), '--clear-groups', ...healthCmd!],
    { env: { PATH: IMAGE_PATH, ...containerEnv }, timeout: 10_000 }).status;
}

describe('the image\'s command, run as the image runs it', () => {
  let layout: Awaited<ReturnType<typeof imageLayout>>;
  let replica: FixtureUpstream;
  let noSandbox: string | null;
  before(async () => {
    layout = await imageLayout();
    replica = await startFixture('vllm-0');
    noSandbox = sandboxUnavailable(layout.dir, user);
  });
  after(async () => {
    await replica?.close();
    layout?.remove();
  });
  const argv = () => [...entrypoint!, ...cmd!];

  it('with nothing configured, it exits 2 and names what is missing', async () => {
    const c = runContained(layout.dir, argv(), env, noSandbox === null ? user : null);
    assert.equal(await c.exited, 2);
    assert.match(c.stderr(), /no upstream replicas: pass --upstream URL/);
    assert.match(c.stderr(), /WARMROUTE_UPSTREAM/);
  });

  for (const by of ['a flag (`docker run … serve --admin-port N`)', 'a config file (`serve --config FILE`)'] as const) {
    it(`HEALTHCHECK follows an admin port set by ${by}`, async (t) => {
      if (noSandbox) return void t.skip(`needs the sandbox (PID 1, read-only root, uid ${user.uid}): ${noSandbox}`);
      const adminPort = await freePort();
      const wr = { ...env, WARMROUTE_UPSTREAM: replica.url, WARMROUTE_HOST: '127.0.0.1', WARMROUTE_PORT: '0' };
      let serveArgs: string[];
      if (by.startsWith('a flag')) serveArgs = ['serve', '--admin-host', '127.0.0.1', '--admin-port', String(adminPort)];
      else {
        const file = join(layout.dir, 'warmroute.yaml');
        writeFileSync(file, `admin:\n  host: 127.0.0.1\n  port: ${adminPort}\n`);
        chmodSync(file, 0o644);
        serveArgs = ['serve', '--config', file];
      }
      const c = runContained(layout.dir, [...entrypoint!, ...serveArgs], wr, user);
      try {
        await waitFor(() => c.logs.some((l) => l.msg === 'warmroute listening') || c.child.exitCode !== null, 20_000, 'the gateway to listen');
        const listening = c.logs.find((l) => l.msg === 'warmroute listening');
        assert.ok(listening, `did not start: ${c.stderr()}`);
        assert.equal(listening.adminUrl, `http://127.0.0.1:${adminPort}`);
        assert.equal(healthInside(layout.dir, c.pid(), wr), 0, 'the HEALTHCHECK passes');
        process.kill(c.pid(), 'SIGTERM');
        assert.equal(await c.exited, 0);
      } finally {
        if (c.child.exitCode === null) c.child.kill('SIGKILL');
      }
    });
  }

  it('from WARMROUTE_* alone, as PID 1 on a read-only root as the Dockerfile\'s USER: serves, passes its HEALTHCHECK, and drains on SIGTERM', async (t) => {
    // Without the sandbox the run would not be the image's: skipped, not passed.
    if (noSandbox) return void t.skip(`needs the sandbox (PID 1, read-only root, uid ${user.uid}): ${noSandbox}`);
    const adminPort = await freePort();
    const wr = {
      ...env, WARMROUTE_UPSTREAM: replica.url, WARMROUTE_HOST: '127.0.0.1', WARMROUTE_PORT: '0',
      WARMROUTE_ADMIN_HOST: '127.0.0.1', WARMROUTE_ADMIN_PORT: String(adminPort),
    };
    // Outside the container (no gateway as PID 1 there): the environment alone says where.
    const health = () => spawnSync(healthCmd![0], healthCmd!.slice(1), { cwd: layout.dir, env: { PATH: IMAGE_PATH, ...wr }, timeout: 10_000 }).status;
    const c = runContained(layout.dir, argv(), wr, user);
    try {
      await waitFor(() => c.logs.some((l) => l.msg === 'warmroute listening') || c.child.exitCode !== null, 20_000, 'the gateway to listen');
      const listening = c.logs.find((l) => l.msg === 'warmroute listening');
      assert.ok(listening, `did not start: ${c.stderr()}`);
      assert.equal(listening.adminUrl, `http://127.0.0.1:${adminPort}`);

      const res = await fetch(`${listening.url}/v1/chat/completions`, {
        method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'fixture-model', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
      });
      assert.equal(res.status, 200);
      assert.match(await res.text(), /data: \[DONE\]/);
      assert.equal(health(), 0, 'the HEALTHCHECK passes');
      assert.equal(healthInside(layout.dir, c.pid(), wr), 0, 'the HEALTHCHECK passes inside the container');

      // The premises (the harness sets them up; checked so the assertions around them mean what
      // they say): node itself, as PID 1, as the Dockerfile's USER, on a read-only root.
      const pid = c.pid();
      assert.equal(procStatus(pid, 'NSpid').split(/\s+/).pop(), '1', 'node is PID 1 in its namespace');
      assert.equal(procStatus(pid, 'Uid').split(/\s+/)[0], String(user.uid), 'the Dockerfile\'s USER');
      assert.equal(procStatus(pid, 'Gid').split(/\s+/)[0], String(user.gid));
      assert.ok(rootReadOnly(pid), 'the root filesystem is read-only');
      assert.match(readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[1], /^dist\/cli\.js$/);
      // SIGTERM to node itself: as PID 1 it only sees the signal because it handles it.
      process.kill(c.pid(), 'SIGTERM');
      assert.equal(await c.exited, 0);
      assert.ok(c.logs.some((l) => l.msg === 'closed'), c.stdout());
      assert.equal(health(), 1, 'the HEALTHCHECK fails once the gateway is gone');
      assert.equal(c.stderr(), '', 'nothing on stderr (a write to the read-only root would show here)');
    } finally {
      if (c.child.exitCode === null) c.child.kill('SIGKILL');
    }
  });
});
