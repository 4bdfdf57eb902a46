// Anthropic Messages on real vLLM replicas through warmroute, with the official Node SDK: a stream
// the SDK assembles, keyed and keyless conversations held on one replica whose prefix cache the
// next turn hits (vLLM's own counters, against the same conversation over chat in the same run),
// count_tokens forwarded, and the simulator's event sequence checked against vLLM's.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { startFleet, type SimFleet } from '../../bench/sim/index.js';
import type { FleetState } from '../../bench/real/fleet-vllm.js';
import { createSseEvents } from '../../src/stream/sse-events.js';
import { startGateway, waitForAccess, type TestGateway } from '../helpers/gateway.js';
import { RUN, getText, longText, postJson, realFleet, replicaOf } from './real-fleet.js';

/** vLLM's prefix-cache hits so far on the replica a gateway answer names (its own counter). */
async function prefixHits(f: FleetState, headers: Headers | Record<string, string | string[] | undefined>): Promise<number> {
  const name = replicaOf(f, headers instanceof Headers ? Object.fromEntries(headers) : headers);
  const r = f.replicas.find((x) => x.name === name)!;
  const m = /^vllm:prefix_cache_hits_total\{[^}]*\} (\S+)/m.exec((await getText(`${r.url}/metrics`)).text);
  return Number(m?.[1] ?? 0);
}

/** The event names of a raw Messages stream. */
function eventNames(text: string): string[] {
  const names: string[] = [];
  const r = createSseEvents((e) => names.push(e.event ?? ''));
  r.push(text);
  r.end();
  return names;
}

describe('real vLLM: Anthropic Messages through warmroute', () => {
  let f: FleetState;
  let g: TestGateway;
  let sim: SimFleet;
  const client = (session: string | null) => new Anthropic({ baseURL: g.url, apiKey: 'unused', maxRetries: 0, defaultHeaders: session === null ? {} : { 'x-session-id': session } });

  before(async () => {
    f = await realFleet();
    g = await startGateway([], { upstreams: f.replicas.map((r) => ({ url: r.url, name: r.name })) });
    sim = await startFleet({ replicas: 1, model: f.model });
  });
  after(async () => {
    await g?.close();
    await sim?.close();
  });

  it('streams a message the SDK assembles; the access line has its first content delta and message_stop', async () => {
    const final = await client(`${RUN}-stream`).messages.stream({ model: f.model, max_tokens: 8, messages: [{ role: 'user', content: 'Say hello' }] }).finalMessage();
    assert.ok(['end_turn', 'max_tokens'].includes(String(final.stop_reason)), String(final.stop_reason));
    assert.ok(final.usage.input_tokens > 0 && final.usage.output_tokens > 0);
    const line = (await waitForAccess(g, (ls) => ls.some((l) => l.path === '/v1/messages'))).find((l) => l.path === '/v1/messages')!;
    assert.equal(line.done, true);
    assert.ok(line.ttftMs > 0);
  });

  it('a keyed conversation: turn two on turn one\'s replica, its prefix hits as many cached tokens as the same turns over chat', async () => {
    const system = longText(`${RUN}-msg-keyed`);
    const c = client(`${RUN}-keyed`);
    const t1 = await c.messages.create({ model: f.model, max_tokens: 4, system, messages: [{ role: 'user', content: 'turn one' }] }).withResponse();
    const said = t1.data.content.map((b) => (b.type === 'text' ? b.text : '')).join('');
    const before2 = await prefixHits(f, t1.response.headers);
    const t2 = await c.messages.create({ model: f.model, max_tokens: 4, system, messages: [{ role: 'user', content: 'turn one' }, { role: 'assistant', content: said }, { role: 'user', content: 'turn two' }] }).withResponse();
    const viaMessages = (await prefixHits(f, t2.response.headers)) - before2;
    assert.equal(replicaOf(f, Object.fromEntries(t2.response.headers)), replicaOf(f, Object.fromEntries(t1.response.headers)));
    assert.equal(t2.response.headers.get('x-warmroute-route'), 'pinned');

    const chatSystem = longText(`${RUN}-chat-keyed`);
    const first = [{ role: 'system', content: chatSystem }, { role: 'user', content: 'turn one' }];
    const c1 = await postJson(`${g.url}/v1/chat/completions`, { model: f.model, max_tokens: 4, temperature: 0, messages: first }, { 'x-session-id': `${RUN}-chat-keyed` });
    const before3 = await prefixHits(f, c1.headers);
    const c2 = await postJson(`${g.url}/v1/chat/completions`, { model: f.model, max_tokens: 4, temperature: 0, messages: [...first, { role: 'assistant', content: c1.body.choices[0].message.content }, { role: 'user', content: 'turn two' }] }, { 'x-session-id': `${RUN}-chat-keyed` });
    const viaChat = (await prefixHits(f, c2.headers)) - before3;
    // vLLM caches whole 128-token blocks on CPU: the two may differ by a block.
    assert.ok(viaChat > 2000, `chat's second turn hit ${viaChat} tokens`);
    assert.ok(Math.abs(viaMessages - viaChat) <= 128, `messages ${viaMessages} vs chat ${viaChat} cached tokens`);
  });

  it('a keyless conversation follows its prefix to one replica, cache_control and metadata changing nothing', async () => {
    const system = longText(`${RUN}-msg-keyless`);
    const c = client(null);
    const t1 = await c.messages.create({ model: f.model, max_tokens: 4, system: [{ type: 'text', text: system, cache_control: { type: 'ephemeral' } }], metadata: { user_id: 'a' }, messages: [{ role: 'user', content: 'turn one' }] }).withResponse();
    const said = t1.data.content.map((b) => (b.type === 'text' ? b.text : '')).join('');
    const t2 = await c.messages.create({ model: f.model, max_tokens: 4, system, metadata: { user_id: 'b' }, messages: [{ role: 'user', content: 'turn one' }, { role: 'assistant', content: said }, { role: 'user', content: [{ type: 'text', text: 'turn two', cache_control: { type: 'ephemeral' } }] }] }).withResponse();
    assert.equal(t2.response.headers.get('x-warmroute-route'), 'prefix');
    assert.equal(t2.response.headers.get('x-warmroute-replica'), t1.response.headers.get('x-warmroute-replica'));
  });

  it('forwards count_tokens to a replica serving the model, with vLLM\'s own count', async () => {
    const body = { model: f.model, messages: [{ role: 'user' as const, content: 'How many tokens is this?' }] };
    const counted = await client(`${RUN}-count`).messages.countTokens(body);
    const direct = await postJson(`${f.replicas[0].url}/v1/messages/count_tokens`, body);
    assert.equal(direct.status, 200, direct.text);
    assert.equal(counted.input_tokens, direct.body.input_tokens);
  });

  it('the simulator streams the event sequence vLLM does', async () => {
    const body = { model: f.model, max_tokens: 6, temperature: 0, stream: true, messages: [{ role: 'user', content: 'Say hello' }] };
    const real = await postJson(`${f.replicas[0].url}/v1/messages`, body);
    const simulated = await postJson(`${sim.urls[0]}/v1/messages`, body);
    const r = eventNames(real.text);
    const s = eventNames(simulated.text);
    assert.deepEqual(s.slice(0, 2), r.slice(0, 2), `real: ${r.join(' ')}`);
    assert.deepEqual(s.slice(-3), r.slice(-3), `real: ${r.join(' ')}`);
  });
});
