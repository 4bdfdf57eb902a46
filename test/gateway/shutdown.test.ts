import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { request } from 'undici';
import { startFixture } from '../helpers/fixture-upstream.js';
import { chatBody } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';

describe('graceful shutdown', () => {
  it('SIGTERM: readyz goes false, new connections are refused, live streams finish, exit 0', { timeout: 60_000 }, async () => {
    const up = await startFixture('a');
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'serve', '--upstream', up.url, '--host', '127.0.0.1', '--port', '0', '--admin-host', '127.0.0.1', '--admin-port', '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    try {
      const lines = createInterface({ input: child.stdout! });
      const logs: Record<string, any>[] = [];
      const listening = new Promise<{ url: string; adminUrl: string }>((resolve, reject) => {
        lines.on('line', (l) => {
          const o = JSON.parse(l);
          logs.push(o);
          if (o.msg === 'warmroute listening') resolve(o);
        });
        child.once('exit', (code) => reject(new Error(`the gateway exited with ${code} before listening`)));
      });
      const { url, adminUrl } = await listening;

      // Three streams of 8 chunks, 100 ms apart (~0.8 s each), held at the replica after their
      // first event until the drain has been checked: live through it however slow the machine
      // (streams of a fixed length could end, and the gateway exit, before a slow check ran).
      const responses = await Promise.all([0, 1, 2].map((i) => request(`${url}/v1/chat/completions`, {
        method: 'POST', headers: { 'x-session-id': `s${i}`, 'x-fixture-chunks': '8', 'x-fixture-gap-ms': '100', 'x-fixture-hold': 'drain' }, body: chatBody(),
      })));
      const streams = responses.map((res) => res.body.text());
      child.kill('SIGTERM');
      let ready = { status: 0, draining: false };
      await waitFor('readyz to report the drain', async () => {
        const res = await request(`${adminUrl}/readyz`);
        ready = { status: res.statusCode, draining: ((await res.body.json()) as { draining: boolean }).draining };
        return ready.draining;
      }, 10_000);
      assert.equal(ready.status, 503);
      await assert.rejects(request(`${url}/v1/models`, { reset: true }), /ECONNREFUSED|other side closed|socket/i);
      up.release('drain');

      const bodies = await Promise.all(streams);
      for (const b of bodies) {
        assert.ok(b.includes('tok7'), 'a stream was cut short');
        assert.ok(b.trimEnd().endsWith('data: [DONE]'));
      }
      assert.equal(await exited, 0);
      assert.ok(logs.some((l) => l.msg === 'closed'));
    } finally {
      child.kill('SIGKILL');
      await up.close();
    }
  });
});
