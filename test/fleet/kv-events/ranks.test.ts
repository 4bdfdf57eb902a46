import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { encode } from '@msgpack/msgpack';
import pino from 'pino';
import { Publisher } from 'zeromq';
import { resolveConfig } from '../../../src/config/load.js';
import { encodeSeq } from '../../../src/fleet/kv-events/decode.js';
import { createKvStreams, rankEndpoint } from '../../../src/fleet/kv-events/streams.js';
import type { ReplicaState } from '../../../src/fleet/registry.js';
import type { Router } from '../../../src/routing/types.js';
import { createMetrics } from '../../../src/telemetry/metrics.js';
import { waitFor } from '../../helpers/wait.js';

// Every data-parallel rank's stream (vLLM binds rank r at the configured port + r) and IPv6
// endpoints, on real zeromq sockets.

async function publisher(t: TestContext, endpoint: string): Promise<Publisher> {
  const pub = new Publisher({ linger: 0, ipv6: true });
  await pub.bind(endpoint);
  t.after(() => pub.close());
  return pub;
}

/** Two publishers on consecutive ports (retried: the port after a free one may be taken). */
async function consecutive(t: TestContext): Promise<[Publisher, Publisher, number]> {
  for (let attempt = 0; ; attempt++) {
    const first = new Publisher({ linger: 0 });
    await first.bind('tcp://127.0.0.1:*');
    const port = Number(new URL((first.lastEndpoint as string).replace('tcp:', 'http:')).port);
    const second = new Publisher({ linger: 0 });
    try {
      await second.bind(`tcp://127.0.0.1:${port + 1}`);
      t.after(() => { first.close(); second.close(); });
      return [first, second, port];
    } catch (e) {
      first.close();
      second.close();
      if (attempt > 20) throw e;
    }
  }
}

function streams(t: TestContext, upstream: Record<string, unknown>) {
  const config = resolveConfig({ upstreams: [{ url: 'http://127.0.0.1:9', name: 'a', ...upstream }] });
  const got: { rank: number; hashes: number }[] = [];
  const states: string[] = [];
  const router = {
    kvEvents: (_r: string, events: readonly { type: string; hashes?: readonly string[] }[], rank = 0) => void got.push({ rank, hashes: events.reduce((n, e) => n + (e.hashes?.length ?? 0), 0) }),
    kvStream: (_r: string, state: string, rank = 0) => void states.push(`${rank}:${state}`),
  } as unknown as Router;
  const replica = { name: 'a', url: 'http://127.0.0.1:9', source: { kind: 'static', upstream: 'a' } } as unknown as ReplicaState;
  const s = createKvStreams({ config, replicas: () => [replica], router, metrics: createMetrics(), log: pino({ level: 'silent' }) });
  s.start();
  t.after(() => s.stop());
  return { got, states };
}

const batch = (n: number, seq: number) => [Buffer.from(''), encodeSeq(BigInt(seq)), Buffer.from(encode({ ts: Date.now() / 1000, events: [{ type: 'BlockStored', block_hashes: Array.from({ length: n }, (_, i) => i + 1), parent_block_hash: null, token_ids: [], block_size: 16, lora_id: null, medium: 'GPU', lora_name: null }] }))];

test('rank r of a data-parallel replica is read at port + r, each rank its own stream', async (t) => {
  const [rank0, rank1, port] = await consecutive(t);
  const { got, states } = streams(t, { kvEvents: { endpoint: `tcp://127.0.0.1:${port}`, dataParallelSize: 2 } });
  let seq = 0;
  await waitFor('both ranks read', async () => {
    await rank0.send(batch(2, seq));
    await rank1.send(batch(3, seq));
    seq++;
    return got.some((g) => g.rank === 0 && g.hashes === 2) && got.some((g) => g.rank === 1 && g.hashes === 3);
  }, 5000);
  assert.ok(states.includes('0:live') && states.includes('1:live'), states.join());
});

test('an IPv6 endpoint is read (sockets opened with IPv6 on)', async (t) => {
  const pub = await publisher(t, 'tcp://[::1]:*');
  const { got } = streams(t, { kvEvents: { endpoint: pub.lastEndpoint as string } });
  let seq = 0;
  await waitFor('a batch over IPv6', async () => {
    await pub.send(batch(1, seq++));
    return got.length > 0;
  }, 5000);
});

test('rank endpoints: the port offset by the rank, refused past 65535', () => {
  assert.equal(rankEndpoint('tcp://[fd00::7]:5557', 0), 'tcp://[fd00::7]:5557');
  assert.equal(rankEndpoint('tcp://[fd00::7]:5557', 3), 'tcp://[fd00::7]:5560');
  assert.throws(() => rankEndpoint('tcp://h:65535', 1), /65535/);
});
