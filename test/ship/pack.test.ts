// The package a user builds: `npm pack`, then in an empty folder `npm install <tarball>` and
// `npx warmroute serve …`, which answers /healthz on its admin port. Offline: the install is tried
// from the local npm cache only; where the cache lacks a dependency (it holds whatever earlier
// installs left), the tarball is unpacked into node_modules as npm would place it, with the
// package's runtime dependencies linked from this checkout's node_modules and its bin linked as
// npm links it, and the test says so. Nothing is written inside the repository.

import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, cpSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { freePort } from '../../bench/lib/procs.js';
import { waitFor } from '../helpers/wait.js';

const ROOT = resolve(import.meta.dirname, '../..');
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  name: string; version: string; bin: Record<string, string>; files: string[]; dependencies: Record<string, string>; engines: { node: string };
};

function run(cmd: string, args: string[], cwd: string, timeout = 120_000) {
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8', timeout, env: { ...process.env, npm_config_update_notifier: 'false' } });
  return { code: r.status, out: `${r.stdout ?? ''}${r.stderr ?? ''}` };
}

/** Every file under `dir` (relative paths), for the freshness check below. */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).map((e) => relative(dir, join(e.parentPath, e.name)));
}

/** Whether dist/ is what `prepare` builds from src/ now: a .js for every .ts, none older than any source. */
function distIsFresh(): boolean {
  const src = join(ROOT, 'src');
  const dist = join(ROOT, 'dist');
  if (!existsSync(dist)) return false;
  const sources = filesUnder(src).filter((f) => f.endsWith('.ts'));
  const built = new Set(filesUnder(dist));
  if (!sources.every((f) => built.has(f.replace(/\.ts$/, '.js')))) return false;
  const newestSource = Math.max(...sources.map((f) => statSync(join(src, f)).mtimeMs));
  return [...built].every((f) => statSync(join(dist, f)).mtimeMs >= newestSource);
}

/**
 * What `npm pack` would pack, in a staging folder: dist/ as `prepare` builds it (this checkout's,
 * when it is fresh, as after `npm ci`; else compiled afresh by the package's own tsconfig).
 */
function stage(dir: string): string {
  copyFileSync(join(ROOT, 'package.json'), join(dir, 'package.json'));
  for (const f of ['README.md', 'LICENSE']) if (existsSync(join(ROOT, f))) copyFileSync(join(ROOT, f), join(dir, f));
  for (const entry of pkg.files.filter((f) => f !== 'dist')) cpSync(join(ROOT, entry), join(dir, entry), { recursive: true });
  if (distIsFresh()) {
    cpSync(join(ROOT, 'dist'), join(dir, 'dist'), { recursive: true });
    return "this checkout's dist/ (fresh)";
  }
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  const r = run(process.execPath, [tsc, '-p', join(ROOT, 'tsconfig.json'), '--outDir', join(dir, 'dist')], ROOT);
  assert.equal(r.code, 0, `tsc: ${r.out}`);
  return 'dist/ compiled afresh (this checkout\'s is older than src/)';
}

/** npm's placement of a tarball without a registry: node_modules/<name>, its dependencies beside it, its bin in .bin. */
function placeWithoutRegistry(app: string, tarball: string): void {
  const into = join(app, 'node_modules', pkg.name);
  mkdirSync(into, { recursive: true });
  const r = run('tar', ['xzf', tarball, '-C', into, '--strip-components=1'], app);
  assert.equal(r.code, 0, r.out);
  for (const dep of Object.keys(pkg.dependencies)) {
    const link = join(app, 'node_modules', dep);
    mkdirSync(dirname(link), { recursive: true });
    symlinkSync(join(ROOT, 'node_modules', dep), link);
  }
  mkdirSync(join(app, 'node_modules', '.bin'), { recursive: true });
  for (const [name, target] of Object.entries(pkg.bin)) {
    chmodSync(join(into, target), 0o755);
    symlinkSync(join('..', pkg.name, target), join(app, 'node_modules', '.bin', name));
  }
}

describe('the package, from a tarball', () => {
  let work = '';
  let tarball = '';
  let installedBy = '';
  let gateway: ChildProcess | null = null;

  let built = '';

  before(() => {
    work = mkdtempSync(join(tmpdir(), 'warmroute-pack-'));
    const staging = join(work, 'staging');
    mkdirSync(staging);
    built = stage(staging);
    // --ignore-scripts: dist/ is already compiled, and `prepare` would compile it again in place.
    const packed = run('npm', ['pack', '--ignore-scripts', '--silent', '--pack-destination', work], staging);
    assert.equal(packed.code, 0, packed.out);
    tarball = join(work, `${pkg.name}-${pkg.version}.tgz`);
    assert.ok(existsSync(tarball), packed.out);
  });

  after(() => {
    if (gateway?.pid) try { process.kill(-gateway.pid, 'SIGKILL'); } catch { /* already gone */ }
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('holds dist/ with the bin and its shebang, the example config and package.json, and no sources or tests', (t) => {
    t.diagnostic(`packed: ${built}`);
    const list = run('tar', ['tzf', tarball], work).out.split('\n').filter(Boolean);
    for (const f of ['package/package.json', 'package/config/warmroute.example.yaml', ...Object.values(pkg.bin).map((b) => `package/${b}`)]) {
      assert.ok(list.includes(f), `${f} is packed`);
    }
    assert.ok(!list.some((f) => /^package\/(src|test|bench|helm)\//.test(f)), 'no sources, tests, benches or chart');
    const cli = run('tar', ['xzOf', tarball, `package/${pkg.bin.warmroute}`], work).out;
    assert.match(cli.split('\n')[0], /^#!\/usr\/bin\/env node$/);
    assert.equal(pkg.engines.node, '>=20', 'the one Node requirement the README states');
  });

  it('installs in an empty folder and `npx warmroute serve` answers /healthz on its admin port', async (t) => {
    const app = join(work, 'app');
    mkdirSync(app);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'empty-folder', private: true }));
    const offline = run('npm', ['install', '--offline', '--no-audit', '--no-fund', tarball], app);
    if (offline.code === 0) installedBy = 'npm install --offline';
    else {
      const missing = /request to (\S+) failed: cache mode is 'only-if-cached'/.exec(offline.out)?.[1] ?? offline.out.split('\n')[0];
      t.diagnostic(`the npm cache here cannot install offline (${missing}): the tarball is placed as npm places it, its dependencies linked from this checkout`);
      rmSync(join(app, 'node_modules'), { recursive: true, force: true });
      placeWithoutRegistry(app, tarball);
      installedBy = 'placed';
    }
    assert.ok(readdirSync(join(app, 'node_modules', '.bin')).includes('warmroute'), `the bin is linked (${installedBy})`);

    const adminPort = await freePort();
    const closed = await freePort(); // nothing listens there: the gateway starts all the same, its replica down
    let output = '';
    gateway = spawn('npx', ['--offline', '--no-install', 'warmroute', 'serve', '--upstream', `http://127.0.0.1:${closed}`,
      '--host', '127.0.0.1', '--port', '0', '--admin-host', '127.0.0.1', '--admin-port', String(adminPort), '--log-level', 'warn'],
    { cwd: app, detached: true, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, npm_config_update_notifier: 'false' } });
    gateway.stdout!.on('data', (d) => { output += d; });
    gateway.stderr!.on('data', (d) => { output += d; });
    let status = 0;
    await waitFor(`/healthz on the admin port (output so far: ${output})`, async () => {
      if (gateway!.exitCode !== null) throw new Error(`warmroute exited ${gateway!.exitCode}: ${output}`);
      try { status = (await fetch(`http://127.0.0.1:${adminPort}/healthz`)).status; return true; } catch { return false; }
    }, 60_000);
    assert.equal(status, 200, output);
  });
});
