import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { startFleet, type SimFleet } from '../../bench/sim/index.js';
import { mulberry32 } from '../../src/prng.js';
import { spawnGateway, type SpawnedGateway } from '../helpers/spawn-gateway.js';
import { startRedis, type RedisChild } from './redis-server.js';

const MODEL = 'google/gemma-4-31B-it';
interface Msg { role: string; content: string }

describe('three gateway processes on one redis-server, each turn to a random gateway', () => {
  let redis: RedisChild;
  let fleet: SimFleet;
  let gateways: SpawnedGateway[] = [];
  before(async () => {
    redis = await startRedis();
    fleet = await startFleet({ replicas: 4, outputTokens: { min: 4, max: 8 } });
    gateways = await Promise.all([0, 1, 2].map(() => spawnGateway(fleet.urls, ['--redis', redis.url])));
  });
  after(async () => {
    await Promise.allSettled(gateways.map((g) => g.stop()));
    await fleet.close();
    await redis.kill();
  });

  it('every keyed session stays on one replica; keyless conversations keep ≥ 95% of their follow-up turns warm', async () => {
    const random = mulberry32(7);
    const sessions = 24;
    const turns = 6;
    const replicasOf = new Map<number, Set<string>>();
    let followUps = 0;
    let warm = 0;
    const cold: string[] = [];
    const conversation = async (i: number) => {
      const keyed = i % 2 === 0;
      const history: Msg[] = [{ role: 'system', content: `Agent for account ${i}. ${'Rules of the service desk. '.repeat(40)}` }];
      let lastPrompt = 0;
      for (let t = 0; t < turns; t++) {
        history.push({ role: 'user', content: `Turn ${t} of caller ${i}: what about item ${t * 7 + i}?` });
        const g = gateways[Math.floor(random() * gateways.length)];
        const res = await request(`${g.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...(keyed ? { 'x-session-id': `call-${i}` } : {}) },
          body: JSON.stringify({ model: MODEL, messages: history }),
        });
        const body = (await res.body.json()) as any;
        assert.equal(res.statusCode, 200, JSON.stringify(body));
        const replica = String(res.headers['x-warmroute-replica']);
        if (!replicasOf.has(i)) replicasOf.set(i, new Set());
        replicasOf.get(i)!.add(replica);
        if (!keyed && t > 0) {
          followUps++;
          // Warm: the whole previous prompt was found in the replica's prefix cache.
          if ((body.usage.prompt_tokens_details?.cached_tokens ?? 0) >= lastPrompt - 16) warm++;
          else cold.push(`${res.headers['x-warmroute-route']} on ${replica} via gateway ${gateways.indexOf(g)}`);
        }
        lastPrompt = body.usage.prompt_tokens;
        history.push({ role: 'assistant', content: body.choices[0].message.content });
        await new Promise((r) => setTimeout(r, 20 + random() * 60)); // the caller speaks
      }
    };
    await Promise.all(Array.from({ length: sessions }, (_, i) => conversation(i)));
    for (let i = 0; i < sessions; i += 2) assert.equal(replicasOf.get(i)!.size, 1, `keyed session ${i} went to ${[...replicasOf.get(i)!]}`);
    assert.ok(warm / followUps >= 0.95, `keyless follow-ups warm: ${warm}/${followUps}; the cold ones: ${cold.join(', ')}`);
    // Every gateway served part of it.
    for (const g of gateways) {
      const text = await (await request(`${g.adminUrl}/metrics`)).body.text();
      const served = [...text.matchAll(/^warmroute_requests_total\{[^}]*code="2xx"\} (\S+)$/gm)].reduce((n, m) => n + Number(m[1]), 0);
      assert.ok(served > 20, `a gateway served ${served}`);
    }
  });
});
