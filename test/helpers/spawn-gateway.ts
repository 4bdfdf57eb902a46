/** A gateway in a process of its own (the CLI through tsx), for tests that read its memory or signal it. */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';

export interface SpawnedGateway {
  child: ChildProcess;
  url: string;
  adminUrl: string;
  port: number;
  /** Parsed log lines so far. */
  logs: Record<string, any>[];
  /** Lines on stdout that were not JSON (not log lines). */
  otherLines: string[];
  /** Resident memory now and its peak so far (VmHWM), from /proc, in KiB. */
  memory(): { rssKb: number; hwmKb: number };
  stop(): Promise<number | null>;
}

export async function spawnGateway(upstreams: string[], extra: string[] = []): Promise<SpawnedGateway> {
  const args = ['--import', 'tsx', 'src/cli.ts', 'serve', ...upstreams.flatMap((u) => ['--upstream', u]), '--host', '127.0.0.1', '--port', '0', '--admin-host', '127.0.0.1', '--admin-port', '0', ...extra];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  const logs: Record<string, any>[] = [];
  const otherLines: string[] = [];
  const lines = createInterface({ input: child.stdout! });
  const listening = await new Promise<{ url: string; adminUrl: string }>((resolve, reject) => {
    lines.on('line', (l) => {
      let o: Record<string, any>;
      // A line that is not a log line (a stray print) must not throw inside this handler.
      try { o = JSON.parse(l); } catch { otherLines.push(l); return; }
      logs.push(o);
      if (o.msg === 'warmroute listening') resolve(o as { url: string; adminUrl: string });
    });
    child.once('exit', (code) => reject(new Error(`the gateway exited with ${code} before listening`)));
  });
  const status = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))?.[1] ?? NaN);
  return {
    child,
    ...listening,
    port: Number(new URL(listening.url).port),
    logs,
    otherLines,
    memory: () => ({ rssKb: status('VmRSS'), hwmKb: status('VmHWM') }),
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}
