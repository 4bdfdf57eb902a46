import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { request } from 'undici';
import { defaultsOf } from '../../src/config/defaults.js';
import { ConfigSchema } from '../../src/config/schema.js';
import { chatBody, startGateway, waitForAccess } from '../helpers/gateway.js';
import { rawResponse, floodEvents, startRawReplica, sse } from '../helpers/raw-replica.js';
import { waitFor } from '../helpers/wait.js';

const portOf = (url: string) => Number(new URL(url).port);

function rawOpen(port: number, bytes: string): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1', () => s.write(bytes, () => resolve(s)));
    s.on('error', reject);
  });
}

const defaults = defaultsOf(ConfigSchema);

describe('a caller never waits behind a client that stopped reading', () => {
  it('the stall bound is well under the queue timeout by default', () => {
    assert.ok(defaults.timeouts.clientStallMs * 2 <= defaults.timeouts.queueMs, `clientStallMs ${defaults.timeouts.clientStallMs} vs queueMs ${defaults.timeouts.queueMs}`);
  });

  it('with the default timeouts, a request queued behind a stalled stream gets its slot when the stall is detected: served, not 503', async () => {
    const event = sse({ id: 'c1', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: 'x'.repeat(64 * 1024) }, finish_reason: null }] });
    const short = `${sse({ id: 'c2', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: 'hi' }, finish_reason: 'stop' }] })}data: [DONE]\n\n`;
    const replica = await startRawReplica((req) => {
      const s = req.socket;
      if (!req.body.toString().includes('endless')) {
        s.write(rawResponse(200, [['content-type', 'text/event-stream'], ['content-length', String(Buffer.byteLength(short))]], short));
        return;
      }
      // As fast as the gateway takes it, at most 256 MiB: a gateway that never ends it fails the test instead of hanging.
      floodEvents(s, event);
    });
    // One slot on the replica; every timeout at its default.
    const g = await startGateway([replica.url], { limits: { maxInflightPerReplica: 1 } });
    const body = chatBody({ max_tokens: 4096 }, 'endless');
    const reader = await rawOpen(portOf(g.url), `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`);
    reader.pause();
    reader.on('error', () => {});
    try {
      await waitFor('the stream to hold the replica\'s slot', () => g.gw.registry.replicas[0].inflight === 1, 5_000);
      const queued = request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: chatBody() });
      const res = await queued;
      const text = await res.body.text();
      assert.equal(res.statusCode, 200, `the queued request was answered ${res.statusCode}: ${text.slice(0, 200)}`);
      assert.match(text, /\[DONE\]/);
      const lines = await waitForAccess(g, (ls) => ls.length >= 2, 5_000);
      assert.equal(lines[0].outcome, 'stalled', 'the stalled stream ended first');
      assert.equal(lines[1].outcome, 'complete');
      assert.ok(lines[1].queueMs < defaults.timeouts.queueMs, `queued ${lines[1].queueMs} ms`);
    } finally {
      reader.destroy();
      await g.close();
      await replica.close();
    }
  });
});
