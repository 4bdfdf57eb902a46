// The image's command run the way the image runs it, with no container engine: the runtime
// stage's layout (/app: package.json, a production node_modules, dist/ compiled by tsc), a clean
// environment, and — where this machine allows it (root, util-linux) — the container's constraints:
// a new PID namespace in which node is PID 1, a private mount namespace whose root filesystem is
// read-only, and the uid/gid the caller names (the Dockerfile's USER). Where it does not, the
// command runs as a plain child and the caller skips what needs the constraints.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, copyFileSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';

const ROOT = resolve(import.meta.dirname, '../..');

/** The runtime stage's /app: package.json (ESM), node_modules, dist/ from the build's tsconfig. */
export async function imageLayout(): Promise<{ dir: string; remove(): void }> {
  const dir = mkdtempSync(join(tmpdir(), 'warmroute-image-'));
  chmodSync(dir, 0o755); // readable by the image's non-root user, as the root-owned files in the image are
  copyFileSync(join(ROOT, 'package.json'), join(dir, 'package.json'));
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  const child = spawn(process.execPath, [tsc, '-p', join(ROOT, 'tsconfig.json'), '--outDir', join(dir, 'dist')], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  child.stderr.on('data', (d) => { out += d; });
  const code = await new Promise<number | null>((r) => child.on('exit', r));
  if (code !== 0) throw new Error(`tsc failed (${code}): ${out}`);
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Who the command runs as inside the sandbox. */
export interface ImageUser { uid: number; gid: number }

// In a new mount namespace a per-mount read-only flag on / changes nothing outside it.
const sandboxPrefix = (u: ImageUser) => [
  'unshare', '--mount', '--pid', '--fork', '--mount-proc', '--propagation', 'private',
  'sh', '-c', `mount -o remount,bind,ro / && exec setpriv --reuid ${u.uid} --regid ${u.gid} --clear-groups "$@"`, 'sh',
];

/** PATH with the node that runs the tests first, as `node` is first on the image's PATH. */
export const IMAGE_PATH = `${dirname(process.execPath)}:/usr/local/bin:/usr/bin:/bin`;

/** Whether this machine can run a command as the sandbox does, reading `dir` as `user`. Null if so, else why not. */
export function sandboxUnavailable(dir: string, user: ImageUser): string | null {
  if (process.platform !== 'linux' || process.getuid?.() !== 0) return 'needs root on Linux (unshare, mount)';
  const sandbox = sandboxPrefix(user);
  const r = spawnSync(sandbox[0], [...sandbox.slice(1), 'node', '-e', "import('fastify').then(() => process.exit(0))"], { cwd: dir, env: { PATH: IMAGE_PATH }, encoding: 'utf8', timeout: 20_000 });
  return r.status === 0 ? null : `unshare/setpriv failed here (${r.error?.message ?? `exit ${r.status}: ${r.stderr.trim().slice(0, 200)}`})`;
}

export interface Contained {
  child: ChildProcess;
  exited: Promise<number | null>;
  stdout: () => string;
  stderr: () => string;
  /** Parsed JSON log lines so far. */
  logs: Record<string, any>[];
  /** The host PID of the command itself (node), once it runs. */
  pid(): number;
}

/** Runs `argv` (the image's ENTRYPOINT + CMD) in `dir` with exactly `env`, sandboxed as `user`, or plain (null). */
export function runContained(dir: string, argv: string[], env: Record<string, string>, user: ImageUser | null): Contained {
  const sandbox = user !== null;
  const cmd = sandbox ? [...sandboxPrefix(user), ...argv] : argv;
  const child = spawn(cmd[0], cmd.slice(1), { cwd: dir, env: { PATH: IMAGE_PATH, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  const logs: Record<string, any>[] = [];
  createInterface({ input: child.stdout! }).on('line', (l) => {
    out += `${l}\n`;
    try { logs.push(JSON.parse(l)); } catch { /* not a log line */ }
  });
  child.stderr!.on('data', (d) => { err += d; });
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  return {
    child, exited, logs, stdout: () => out, stderr: () => err,
    pid() {
      if (!sandbox) return child.pid!;
      // unshare --fork: its one child is sh, which exec'd setpriv, which exec'd node.
      const kids = readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
      if (kids.length !== 1) throw new Error(`expected one child of unshare, got ${kids.join(',') || 'none'}`);
      return Number(kids[0]);
    },
  };
}

/** A field of /proc/PID/status (NSpid, Uid, ...). */
export function procStatus(pid: number, field: string): string {
  return new RegExp(`^${field}:\\s*(.*)$`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? '';
}

/** Whether `path` (the root of the process's filesystem) is mounted read-only for `pid`. */
export function rootReadOnly(pid: number): boolean {
  const root = readFileSync(`/proc/${pid}/mountinfo`, 'utf8').split('\n').map((l) => l.split(' ')).find((f) => f[4] === '/');
  return root !== undefined && root[5].split(',').includes('ro');
}
