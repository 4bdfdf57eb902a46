/** A throwaway redis-server child on a free loopback port (never 6379), for tests that need real Redis. */
import { spawn, type ChildProcess } from 'node:child_process';
import { connect, createServer, type AddressInfo } from 'node:net';
import pino, { type Logger } from 'pino';
import { Redis } from 'ioredis';

export interface RedisChild {
  readonly port: number;
  readonly url: string;
  /** SIGKILL: an outage with no goodbye to the clients. */
  kill(): Promise<void>;
  /** A fresh redis-server on the same port (empty: no persistence). */
  restart(): Promise<void>;
  /** A plain client for the test to inspect Redis with. */
  client(): Redis;
}

export async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

async function accepting(port: number, deadline: number, exited: () => boolean = () => false): Promise<void> {
  for (;;) {
    if (exited()) throw new PortTaken(port);
    const ok = await new Promise<boolean>((r) => {
      const c = connect(port, '127.0.0.1', () => { c.destroy(); r(true); });
      c.on('error', () => r(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new NotAccepting(port);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** redis-server exited before it accepted: another process took the port after freePort() saw it free. */
class PortTaken extends Error {
  constructor(port: number) { super(`redis-server exited at start: port ${port} taken`); }
}

/** redis-server is running but did not accept on its port in time (seen once in a full `npm test`). */
class NotAccepting extends Error {
  constructor(port: number) { super(`redis-server did not start on port ${port}`); }
}

export async function startRedis(): Promise<RedisChild> {
  let port = await freePort();
  let child: ChildProcess | null = null;
  const clients: Redis[] = [];
  const killNow = () => child?.kill('SIGKILL');
  // Even if the test process dies mid-way, the child does not outlive it.
  process.once('exit', killNow);

  async function start() {
    const c = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
    child = c;
    try {
      await accepting(port, Date.now() + 5_000, () => c.exitCode !== null || c.signalCode !== null);
    } catch (e) {
      await kill();
      throw e;
    }
  }
  async function kill() {
    const c = child;
    if (c === null || c.exitCode !== null || c.signalCode !== null) return;
    const exited = new Promise((r) => c.once('exit', r));
    c.kill('SIGKILL');
    await exited;
    child = null;
  }
  // The port freePort() found can be taken before redis-server binds it, or the server may not
  // accept in time: another free port, a few times.
  for (let attempt = 1; ; attempt++) {
    try {
      await start();
      break;
    } catch (e) {
      if (!(e instanceof PortTaken || e instanceof NotAccepting) || attempt === 3) throw e;
      port = await freePort();
    }
  }
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    async kill() {
      for (const c of clients.splice(0)) c.disconnect();
      await kill();
    },
    async restart() {
      await kill();
      await start();
    },
    client() {
      const c = new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 1 });
      c.on('error', () => {});
      clients.push(c);
      return c;
    },
  };
}

/** Sum of a counter's values, optionally only those with the given label value. */
export async function counterSum(c: { get(): Promise<{ values: { labels: Record<string, unknown>; value: number }[] }> }, label?: [string, string]): Promise<number> {
  const { values } = await c.get();
  return values.filter((v) => !label || v.labels[label[0]] === label[1]).reduce((s, v) => s + v.value, 0);
}

// Generic: it lives with the other test helpers; re-exported for the tests that import it from here.
export { waitFor } from '../helpers/wait.js';

/** A pino logger that keeps its lines in memory. */
export function memoryLogger(level = 'info'): { log: Logger; lines: Record<string, any>[] } {
  const lines: Record<string, any>[] = [];
  const log = pino({ level }, { write: (s: string) => { lines.push(JSON.parse(s)); } });
  return { log, lines };
}
