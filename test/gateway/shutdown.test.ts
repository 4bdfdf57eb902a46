import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { request } from 'undici';
import { startFixture } from '../helpers/fixture-upstream.js';
import { chatBody } from '../helpers/gateway.js';

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

      // Three streams of 8 chunks, 100 ms apart (~0.8 s each).
      const streams = [0, 1, 2].map(async (i) => {
        const res = await request(`${url}/v1/chat/completions`, {
          method: 'POST', headers: { 'x-session-id': `s${i}`, 'x-fixture-chunks': '8', 'x-fixture-gap-ms': '100' }, body: chatBody(),
        });
        return res.body.text();
      });
      await new Promise((r) => setTimeout(r, 250));
      child.kill('SIGTERM');
      await new Promise((r) => setTimeout(r, 100));
      const ready = await request(`${adminUrl}/readyz`);
      assert.equal(ready.statusCode, 503);
      assert.equal(((await ready.body.json()) as { draining: boolean }).draining, true);
      await assert.rejects(request(`${url}/v1/models`, { reset: true }), /ECONNREFUSED|other side closed|socket/i);

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
