import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { Agent } from 'undici';
import { createRegistry } from '../../src/fleet/registry.js';
import { replay } from '../../src/fleet/replay.js';
import { waitFor } from '../helpers/wait.js';

describe('a replay (drain handoff, deploy warmup)', () => {
  it('ends when the gateway stops, long before its own time limit', async () => {
    let arrived = 0;
    const server = createServer(() => { arrived++; }); // a replica that never answers
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const agent = new Agent();
    try {
      const [r] = createRegistry([{ name: 'stuck', url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, weight: 1 }]).replicas;
      const stopping = new AbortController();
      const result = replay(agent, r, '/v1/chat/completions', Buffer.from('{}'), 600_000, stopping.signal);
      await waitFor('the replay to reach the replica', () => arrived === 1, 5_000);
      stopping.abort();
      const ended = await result;
      assert.equal(ended.ok, false);
      assert.ok(ended.ms < 60_000, `ended after ${ended.ms} ms`);
    } finally {
      server.closeAllConnections();
      server.close();
      await agent.close();
    }
  });
});
