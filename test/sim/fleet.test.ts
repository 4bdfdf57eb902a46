import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { once } from 'node:events';
import { test } from 'node:test';
import { startFleet } from '../../bench/sim/index.js';
import { keepAliveAgent, streamChat } from '../../bench/sim/probe.js';
import { FAST, text, user } from './helpers.js';

async function freePort(): Promise<number> {
  const s = createServer().listen(0, '127.0.0.1');
  await once(s, 'listening');
  const port = (s.address() as { port: number }).port;
  s.close();
  await once(s, 'close');
  return port;
}

test('a fleet is many independent replicas in one process', async (t) => {
  const fleet = await startFleet({ replicas: 3, ...FAST });
  t.after(() => fleet.close());
  assert.equal(new Set(fleet.urls).size, 3);
  assert.deepEqual(
    fleet.replicas.map((r) => r.name),
    ['sim-0', 'sim-1', 'sim-2'],
  );
  const agent = keepAliveAgent();
  t.after(() => agent.destroy());
  const messages = user(text(100));
  const cached = async (url: string) =>
    (await streamChat(url, { messages, max_tokens: 1 }, agent)).usage!.prompt_tokens_details!.cached_tokens;
  assert.equal(await cached(fleet.urls[0]), 0);
  assert.ok((await cached(fleet.urls[0])) > 0);
  assert.equal(await cached(fleet.urls[1]), 0, 'each replica has its own prefix cache');
});

test('basePort gives consecutive ports; close() frees them and drops keep-alive sockets at once', async () => {
  const base = await freePort();
  const fleet = await startFleet({ replicas: 2, basePort: base, ...FAST });
  assert.deepEqual(
    fleet.replicas.map((r) => r.port),
    [base, base + 1],
  );
  const agent = keepAliveAgent();
  await streamChat(fleet.urls[0], { messages: user('hi'), max_tokens: 1 }, agent);
  const sockets = Object.values(agent.freeSockets).flat();
  assert.equal(sockets.length, 1, 'an idle keep-alive socket is open');
  // The agent unrefs idle sockets; ref it so the loop waits for the server to drop it.
  sockets[0]!.ref();
  const closedSocket = once(sockets[0]!, 'close');
  const t0 = performance.now();
  await fleet.close();
  await closedSocket;
  assert.ok(performance.now() - t0 < 500);
  const again = createServer().listen(base, '127.0.0.1');
  await once(again, 'listening');
  again.close();
  agent.destroy();
});

test('the CLI prints one line per replica, applies start faults, and exits cleanly on SIGTERM', async () => {
  const child = spawn(process.execPath, ['--import', 'tsx', 'bench/sim/cli.ts', '--replicas', '2', '--fault', 'slow:factor=2'], {
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  let out = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (d: string) => (out += d));
  const deadline = Date.now() + 15000;
  while (out.split('\n').filter(Boolean).length < 2) {
    assert.ok(Date.now() < deadline, 'CLI did not start');
    await new Promise((r) => setTimeout(r, 50));
  }
  const lines = out.trim().split('\n');
  assert.match(lines[0], /^http:\/\/127\.0\.0\.1:\d+$/);
  assert.match(lines[1], /^http:\/\/127\.0\.0\.1:\d+$/);
  const url = lines[1];
  const state = await (await fetch(`${url}/sim/state`)).json();
  assert.deepEqual(state.faults, [{ kind: 'slow', factor: 2 }]);
  child.kill('SIGTERM');
  const [code] = await once(child, 'exit');
  assert.equal(code, 0);
});
