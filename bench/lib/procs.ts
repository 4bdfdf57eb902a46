import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';
import { createServer } from 'node:net';
import { createInterface } from 'node:readline';

const children = new Set<ChildProcess>();
let hooked = false;

const groups = new Set<ChildProcess>();

/** A child started as a process-group leader is killed with its whole group (a launcher's workers too). */
function signal(c: ChildProcess, sig: NodeJS.Signals) {
  if (groups.has(c) && c.pid !== undefined) {
    try {
      process.kill(-c.pid, sig);
      return;
    } catch { /* the group is gone already */ }
  }
  c.kill(sig);
}

function killAll() {
  for (const c of children) signal(c, 'SIGKILL');
}

/** Kills every child this process started when it exits, however it exits. */
function hookExit() {
  if (hooked) return;
  hooked = true;
  process.on('exit', killAll);
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => { killAll(); process.exit(130); });
}

/** A free loopback port (bound and released: good enough on a private machine). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.unref();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

export interface Child {
  proc: ChildProcess;
  stop(): Promise<void>;
}

/**
 * Starts a process and resolves once a line of its stdout matches `ready` (at once when null;
 * rejects after `timeoutMs`). The child is killed when this process exits.
 */
export async function startChild(cmd: string, args: string[], ready: RegExp | null, opts: { timeoutMs?: number; env?: NodeJS.ProcessEnv; quietAfterReady?: boolean; group?: boolean } = {}): Promise<Child> {
  hookExit();
  // group: the child leads a process group of its own, and stop() signals the whole group, so a
  // launcher that forks workers (a Python router, nginx's master) leaves nothing behind.
  const proc = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...opts.env }, detached: opts.group === true });
  children.add(proc);
  if (opts.group) groups.add(proc);
  proc.on('exit', () => {
    children.delete(proc);
    groups.delete(proc);
  });
  let stderr = '';
  proc.stderr!.on('data', (d: Buffer) => { stderr = (stderr + d.toString()).slice(-4000); });
  if (ready) await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${cmd} ${args.join(' ')} not ready after ${opts.timeoutMs ?? 20_000} ms\n${stderr}`)), opts.timeoutMs ?? 20_000);
    const lines = createInterface({ input: proc.stdout! });
    lines.on('line', (l) => {
      if (ready.test(l)) {
        clearTimeout(timer);
        resolve();
      }
    });
    proc.on('exit', (code) => { clearTimeout(timer); reject(new Error(`${cmd} exited with ${code} before ready\n${stderr}`)); });
  });
  // Keep draining stdout so a chatty child never blocks on a full pipe.
  proc.stdout!.resume();
  return {
    proc,
    stop: () => new Promise<void>((resolve) => {
      if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
      const leader = groups.has(proc);
      proc.once('exit', () => {
        // The leader is gone; its group's stragglers are not waited for, but they are not left.
        if (leader && proc.pid !== undefined) {
          try { process.kill(-proc.pid, 'SIGKILL'); } catch { /* none left */ }
        }
        resolve();
      });
      signal(proc, 'SIGTERM');
      setTimeout(() => signal(proc, 'SIGKILL'), 5_000).unref();
    }),
  };
}

export const TSX = ['--import', 'tsx'];

/**
 * Starts a process and resolves with the first `count` stdout lines matching `match` (say, one URL
 * per replica from `npm run sim`); rejects after `timeoutMs` or if it exits first. Killed on exit
 * like every child started here.
 */
export async function startChildLines(cmd: string, args: string[], match: RegExp, count: number, opts: { timeoutMs?: number; env?: NodeJS.ProcessEnv; group?: boolean } = {}): Promise<Child & { lines: string[] }> {
  const lines: string[] = [];
  const child = await startChild(cmd, args, null, opts);
  const { proc } = child;
  const timeoutMs = opts.timeoutMs ?? 20_000;
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${cmd} ${args.join(' ')}: ${lines.length}/${count} lines after ${timeoutMs} ms`)), timeoutMs);
      const rl = createInterface({ input: proc.stdout! });
      rl.on('line', (l) => {
        if (lines.length < count && match.test(l)) lines.push(l);
        if (lines.length === count) {
          clearTimeout(timer);
          resolve();
        }
      });
      proc.once('exit', (code) => { clearTimeout(timer); reject(new Error(`${cmd} exited with ${code} before printing ${count} lines`)); });
    });
  } catch (e) {
    await child.stop();
    throw e;
  }
  return { ...child, lines };
}

/** The pids of a process and every process in its group, read from /proc; null where /proc cannot be read. */
function groupProcesses(pid: number): { pid: number; stat: string[] }[] | null {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return null;
  }
  const out: { pid: number; stat: string[] }[] = [];
  for (const e of entries) {
    if (!/^\d+$/.test(e)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${e}/stat`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    // The command name is in parentheses and may hold spaces: the fields after it are fixed.
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(e) === pid || Number(f[2]) === pid) out.push({ pid: Number(e), stat: f });
  }
  return out;
}

/**
 * CPU seconds (user + system) used so far by a process and every process in its group, from
 * /proc; null where /proc cannot be read (not Linux). Comparing routers on one 2-core machine, a
 * router's CPU is taken from the replicas it routes to: this says how much.
 */
export function groupCpuSeconds(pid: number): number | null {
  const procs = groupProcesses(pid);
  if (procs === null || procs.length === 0) return null;
  let ticks = 0;
  for (const p of procs) ticks += Number(p.stat[11]) + Number(p.stat[12]);
  return ticks / CLOCK_TICKS;
}

/** USER_HZ, the unit of /proc's times: 100 on x86 and arm Linux (getconf CLK_TCK). */
const CLOCK_TICKS = 100;

/**
 * Sets the CPU priority of every thread of every process in a group, and of the group's session
 * where the kernel schedules by autogroup (/proc/sys/kernel/sched_autogroup_enabled: then CPU is
 * shared between sessions first, and a thread's own nice only counts within its session).
 * Threads and processes started later inherit it. Best effort: says how many threads took it,
 * and whether the session did.
 */
export function setGroupNice(pid: number, nice: number): { threads: number; session: boolean } {
  let done = 0;
  let session = false;
  try {
    writeFileSync(`/proc/${pid}/autogroup`, String(nice));
    session = true;
  } catch { /* no autogroups here, or not allowed to set them */ }
  for (const p of groupProcesses(pid) ?? []) {
    let tids: string[];
    try {
      tids = readdirSync(`/proc/${p.pid}/task`);
    } catch {
      continue;
    }
    for (const t of tids) {
      try {
        setPriority(Number(t), nice);
        done++;
      } catch { /* gone meanwhile */ }
    }
  }
  return { threads: done, session };
}

/** A process's CPU priority as the scheduler sees it: its session's autogroup nice where autogroups are on, else its own; null if unknown. */
export function effectiveNice(pid: number): number | null {
  try {
    if (readFileSync('/proc/sys/kernel/sched_autogroup_enabled', 'utf8').trim() === '1') {
      const m = /nice (-?\d+)/.exec(readFileSync(`/proc/${pid}/autogroup`, 'utf8'));
      if (m) return Number(m[1]);
    }
  } catch { /* not Linux, or no autogroups */ }
  try {
    return getPriority(pid);
  } catch {
    return null;
  }
}
