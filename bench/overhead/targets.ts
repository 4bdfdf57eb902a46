import { execFileSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { connect } from 'node:net';
import { join } from 'node:path';
import { nginxConf, nginxDir } from '../lib/nginx.js';
import { freePort, startChild, TSX, type Child } from '../lib/procs.js';

export interface Target {
  name: string;
  url: string;
  adminUrl?: string;
  child?: Child;
}

/**
 * Resolves once something accepts on `port`. With `child`, rejects as soon as that process exits
 * (a gateway that could not bind or start), with what it printed last, instead of waiting out the bound.
 */
export async function waitForPort(port: number, timeoutMs = 10_000, child?: { proc: ChildProcess; output: () => string }): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ok = await new Promise<boolean>((r) => {
      const s = connect(port, '127.0.0.1', () => { s.destroy(); r(true); });
      s.on('error', () => r(false));
    });
    if (ok) return;
    if (child && (child.proc.exitCode !== null || child.proc.signalCode !== null)) {
      throw new ExitedBeforeListening(port, `exited (code ${child.proc.exitCode}, signal ${child.proc.signalCode}) before it listened on ${port}; its last output:\n${child.output().trim() || '(none)'}`);
    }
    if (Date.now() > deadline) throw new Error(`nothing listening on ${port} after ${timeoutMs} ms${child ? `; its last output:\n${child.output().trim() || '(none)'}` : ''}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export class ExitedBeforeListening extends Error {
  constructor(readonly port: number, message: string) { super(message); }
}

/** `kv`: the upstream also publishes KV cache events (see upstream.ts); `kvEvents` says where. `chunkGapMs`: see upstream.ts. */
export async function startUpstream(opts: { kv?: boolean; chunkGapMs?: number } = {}): Promise<Target & { kvEvents?: { endpoint: string; replayEndpoint: string } }> {
  const port = await freePort();
  const kv = opts.kv ? [await freePort(), await freePort()] : null;
  const child = await startChild(process.execPath, [...TSX, 'bench/overhead/upstream.ts', '--port', String(port), '--chunk-gap-ms', String(opts.chunkGapMs ?? 0), ...(kv ? ['--kv-port', String(kv[0]), '--kv-replay-port', String(kv[1])] : [])], /listening/, { group: true });
  const kvEvents = kv ? { endpoint: `tcp://127.0.0.1:${kv[0]}`, replayEndpoint: `tcp://127.0.0.1:${kv[1]}` } : undefined;
  return { name: 'direct', url: `http://127.0.0.1:${port}`, child, kvEvents };
}

/** A gateway config file (JSON is YAML) in a fresh temporary folder; its path. */
export function gatewayConfigFile(config: Record<string, unknown>): string {
  const dir = mkdtempSync(join(tmpdir(), 'warmroute-overhead-'));
  const file = join(dir, 'config.json');
  writeFileSync(file, JSON.stringify(config));
  return file;
}

/**
 * How to start the gateway: the compiled dist/cli.js, as in production (tsx keeps function names
 * with a helper call per closure, which costs measurable CPU per request); src through tsx only
 * when no build exists.
 */
export function gatewayEntry(): string[] {
  if (existsSync('dist/cli.js') && statSync('dist/cli.js').mtimeMs >= newestSource('src')) return ['dist/cli.js'];
  process.stderr.write('dist/ is missing or older than src/: running the gateway through tsx (run `npm run build` for production figures)\n');
  return [...TSX, 'src/cli.ts'];
}

function newestSource(dir: string): number {
  let newest = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    newest = Math.max(newest, e.isDirectory() ? newestSource(p) : statSync(p).mtimeMs);
  }
  return newest;
}

/**
 * A gateway in front of `upstream`: this checkout's (see gatewayEntry), or the `entry` script given
 * (with node's own flags before it, as a list: `['--cpu-prof', 'dist/cli.js']`).
 * `upstream` '' = the upstreams come from a --config file in `extra`; `env`: added to this process's for the gateway.
 */
export async function startWarmroute(upstream: string, extra: string[] = [], entry?: string | readonly string[], name = 'warmroute', env?: NodeJS.ProcessEnv, readyMs = 20_000): Promise<Target> {
  // The ports freePort() found can be taken before the gateway binds them: any outbound socket on
  // this machine (the gateway's own probes of its replicas, made before it listens, included) may
  // get one as its ephemeral port. The gateway then exits with "cannot listen": fresh ports, a few times.
  for (let attempt = 1; ; attempt++) {
    const [port, admin] = [await freePort(), await freePort()];
    // Readiness from the port, not a log line: the log level is the caller's choice. A session of
    // its own (group), as every peer router and replica has: where the kernel schedules by autogroup
    // (/proc/sys/kernel/sched_autogroup_enabled), CPU is shared between sessions, and a gateway left
    // in the bench's session would split one share with the load generator while a peer had a whole one.
    const child = await startChild(process.execPath, [...(entry === undefined ? gatewayEntry() : typeof entry === 'string' ? [entry] : entry), 'serve', ...(upstream ? ['--upstream', upstream] : []), '--host', '127.0.0.1', '--port', String(port), '--admin-host', '127.0.0.1', '--admin-port', String(admin), ...extra], null, { group: true, env });
    let output = '';
    const keep = (d: Buffer) => { output = (output + d.toString()).slice(-2000); };
    child.proc.stdout?.on('data', keep);
    child.proc.stderr?.on('data', keep);
    try {
      await waitForPort(admin, readyMs, { proc: child.proc, output: () => output });
    } catch (e) {
      await child.stop();
      if (e instanceof ExitedBeforeListening && /cannot listen on .*another process is listening/.test(output) && attempt < 4) {
        process.stderr.write(`${name}: a port was taken before the gateway bound it (attempt ${attempt}); trying fresh ports\n`);
        continue;
      }
      throw e;
    }
    child.proc.stdout?.off('data', keep);
    child.proc.stderr?.off('data', keep);
    return { name, url: `http://127.0.0.1:${port}`, adminUrl: `http://127.0.0.1:${admin}`, child };
  }
}

export const startNaive = (upstream: string) => startScript('fastify+reply-from', 'bench/overhead/naive-proxy.ts', upstream);

async function startScript(name: string, script: string, upstream: string): Promise<Target> {
  const port = await freePort();
  const child = await startChild(process.execPath, [...TSX, script, '--port', String(port), '--upstream', upstream], /listening/, { group: true });
  return { name, url: `http://127.0.0.1:${port}`, child };
}

/** The Node references: node:http + undici (the floor), the same behind a fastify route, a TCP pipe. */
export const startRawNode = (upstream: string) => startScript('node:http+undici', 'bench/overhead/raw-proxy.ts', upstream);
export const startFastifyUndici = (upstream: string) => startScript('fastify+undici', 'bench/overhead/fastify-proxy.ts', upstream);
export const startTcpPipe = (upstream: string) => startScript('node tcp pipe', 'bench/overhead/tcp-pipe.ts', upstream);

export function nginxPath(): string | null {
  for (const p of ['/usr/sbin/nginx', '/usr/bin/nginx', '/usr/local/sbin/nginx']) {
    try {
      execFileSync(p, ['-v'], { stdio: 'ignore' });
      return p;
    } catch { /* not there */ }
  }
  return null;
}

/** nginx as the C reference (bench/lib/nginx.ts): consistent hashing on x-session-id over the one upstream. */
export async function startNginx(bin: string, upstream: string): Promise<Target> {
  const port = await freePort();
  const dir = nginxDir();
  writeFileSync(join(dir, 'nginx.conf'), nginxConf({ dir, port, upstreams: [upstream], hashHeader: 'x-session-id' }));
  const { spawn } = await import('node:child_process');
  // A session of its own, as the gateway's (see startWarmroute).
  const proc = spawn(bin, ['-p', dir, '-c', join(dir, 'nginx.conf')], { stdio: 'ignore', detached: true });
  process.on('exit', () => proc.kill('SIGKILL'));
  await waitForPort(port);
  return {
    name: 'nginx',
    url: `http://127.0.0.1:${port}`,
    child: { proc, stop: async () => { proc.kill('SIGQUIT'); } },
  };
}
