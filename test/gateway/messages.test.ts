// POST /v1/messages through a gateway on real sockets: the stream relayed byte for byte, a replica
// cut mid-stream answered with Anthropic's error event, the gateway's own errors in Anthropic's
// shape, the tool-call guard on a cut tool_use block, and the trace's GenAI attributes.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { request } from 'undici';
import { SpanKind } from '@opentelemetry/api';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace';
import { DEFAULT_MODEL, startFleet } from '../../bench/sim/index.js';
import { startRawReplica } from '../helpers/raw-replica.js';
import { startGateway, waitForAccess, type TestGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';
import { FAST } from '../sim/helpers.js';

const ev = (type: string, data: object) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
/** What vLLM sends for a two-token answer, with a multi-byte character split across reads. */
const EVENTS = [
  ev('message_start', { message: { id: 'chatcmpl-1', content: [], model: 'fixture-model', stop_reason: null, stop_sequence: null, usage: { input_tokens: 7, output_tokens: 0 } } }),
  ev('content_block_start', { content_block: { type: 'text', text: '' }, index: 0 }),
  ev('content_block_delta', { delta: { type: 'text_delta', text: 'Grüß' }, index: 0 }),
  ev('content_block_delta', { delta: { type: 'text_delta', text: ' dich' }, index: 0 }),
];
const TAIL = ev('content_block_stop', { index: 0 }) + ev('message_delta', { delta: { stop_reason: 'end_turn' }, usage: { input_tokens: 7, output_tokens: 2 } }) + ev('message_stop', {});

const body = (extra: object = {}) => JSON.stringify({ model: 'fixture-model', max_tokens: 64, stream: true, messages: [{ role: 'user', content: 'Hallo' }], ...extra });
const post = (g: TestGateway, b: string, headers: Record<string, string> = {}) =>
  request(`${g.url}/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01', ...headers }, body: b });

/** Until the health probe has learned the replicas' model. */
async function ready(g: TestGateway): Promise<void> {
  await waitFor('a routable replica', async () => {
    const r = await request(`${g.url}/v1/models`);
    await r.body.arrayBuffer();
    return r.statusCode === 200;
  }, 5_000);
}

describe('Anthropic Messages through the gateway', () => {
  it('relays the stream byte for byte and the body it was sent unchanged', async () => {
    const bytes = Buffer.from(EVENTS.join('') + TAIL);
    const split = bytes.indexOf(Buffer.from('ü')) + 1;
    const replica = await startRawReplica((req) => {
      req.socket.write('HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\ntransfer-encoding: chunked\r\n\r\n');
      const chunk = (b: Buffer) => req.socket.write(`${b.length.toString(16)}\r\n${b.toString('latin1')}\r\n`, 'latin1');
      chunk(bytes.subarray(0, split));
      setTimeout(() => { chunk(bytes.subarray(split)); req.socket.write('0\r\n\r\n'); }, 5);
    });
    const g = await startGateway([replica.url]);
    try {
      await ready(g);
      const sent = body({ metadata: { user_id: 'u' }, system: [{ type: 'text', text: 'Be brief.', cache_control: { type: 'ephemeral' } }] });
      const res = await post(g, sent, { 'x-session-id': 'relay' });
      assert.equal(res.statusCode, 200);
      const got = Buffer.from(await res.body.arrayBuffer());
      assert.ok(got.equals(bytes), 'the bytes the replica sent, and nothing else');
      assert.equal(replica.requests[0].body.toString('utf8'), sent, 'forwarded as received: no priority or other field added');
      const line = (await waitForAccess(g, (ls) => ls.some((l) => l.path === '/v1/messages'), 10_000)).find((l) => l.path === '/v1/messages')!;
      assert.equal(line.done, true);
      assert.equal(line.firstToken, 'content');
      assert.equal(line.promptTokens, 7);
      assert.equal(line.completionTokens, 2);
    } finally {
      await g.close();
      await replica.close();
    }
  });

  it('ends a stream cut mid-way with Anthropic\'s error event after what was relayed', async () => {
    const replica = await startRawReplica((req) => {
      req.socket.write('HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n');
      const part = EVENTS.slice(0, 3).join('') + 'event: content_block_delta\ndata: {"type":"cont';
      req.socket.write(`${Buffer.byteLength(part).toString(16)}\r\n${part}\r\n`, () => setTimeout(() => req.socket.destroy(), 5));
    });
    const g = await startGateway([replica.url]);
    try {
      await ready(g);
      const res = await post(g, body());
      assert.equal(res.statusCode, 200);
      const text = await res.body.text();
      const tail = text.slice(text.lastIndexOf('\n\nevent: error\n'));
      assert.ok(text.startsWith(EVENTS.slice(0, 3).join('')), 'the events relayed before the failure, as they were');
      assert.match(tail, /^\n\nevent: error\ndata: \{"type":"error","error":\{"type":"api_error","message":"Replica [^"]+ failed mid-stream: [^"]+"\}\}\n\n$/);
      const line = (await waitForAccess(g, (ls) => ls.some((l) => l.outcome === 'interrupted'), 10_000)).find((l) => l.outcome === 'interrupted')!;
      assert.equal(line.done, false);
    } finally {
      await g.close();
      await replica.close();
    }
  });

  it('answers in Anthropic\'s shape when no replica is left: overloaded_error on a 503, api_error on a 502', async () => {
    const replica = await startRawReplica((req) => req.socket.destroy());
    const g = await startGateway([replica.url], { limits: { maxRetries: 0 } });
    try {
      await ready(g);
      const failed = await post(g, body());
      assert.equal(failed.statusCode, 502);
      assert.deepEqual(Object.keys(await failed.body.json() as object), ['type', 'error']);
      const again = await post(g, body());
      const e = await again.body.json() as { type: string; error: { type: string; message: string } };
      assert.equal(e.type, 'error');
      assert.equal(e.error.type, again.statusCode === 503 ? 'overloaded_error' : 'api_error');
      const unknown = await post(g, body({ model: 'no-such-model' }));
      assert.equal(unknown.statusCode, 404);
      assert.equal((await unknown.body.json() as { error: { type: string } }).error.type, 'not_found_error');
      const wrongMethod = await request(`${g.url}/v1/messages`);
      assert.equal(wrongMethod.statusCode, 405);
      assert.equal((await wrongMethod.body.json() as { error: { type: string } }).error.type, 'invalid_request_error');
      const batches = await request(`${g.url}/v1/messages/batches`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
      assert.equal(batches.statusCode, 404);
      assert.equal((await batches.body.json() as { type: string }).type, 'error', 'an Anthropic route the gateway lacks: that API\'s 404');
      const chat = await request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'no-such-model', messages: [{ role: 'user', content: 'hi' }] }) });
      assert.equal((await chat.body.json() as { error: { code: string } }).error.code, 'model_not_found', 'chat keeps OpenAI\'s shape');
    } finally {
      await g.close();
      await replica.close();
    }
  });

  it('counts a tool_use block cut by max_tokens as a truncated tool call, and says so once', async () => {
    const fleet = await startFleet({ replicas: 1, ...FAST });
    // The floor off: the request reaches the replica with its own small max_tokens.
    const g = await startGateway(fleet.urls, { tools: { minMaxTokens: 0 } });
    try {
      await ready(g);
      const tools = [{ name: 'get_weather', input_schema: { type: 'object', properties: { city: { type: 'string' }, unit: { type: 'string' } } } }];
      const ask = (max: number, choice: object) => JSON.stringify({ model: DEFAULT_MODEL, max_tokens: max, stream: true, tools, tool_choice: choice, messages: [{ role: 'user', content: 'Call the weather tool' }] });
      // A call named by tool_choice: with auto the simulator's arguments are held back till complete.
      const cut = await post(g, ask(12, { type: 'tool', name: 'get_weather' }));
      const text = await cut.body.text();
      assert.match(text, /"stop_reason":"max_tokens"/, 'the simulator stopped the answer on its limit');
      assert.match(text, /"type":"tool_use"/);
      const whole = await post(g, ask(400, { type: 'auto' }));
      assert.match(await whole.body.text(), /"stop_reason":"tool_use"/);
      const lines = await waitForAccess(g, (ls) => ls.filter((l) => l.path === '/v1/messages').length >= 2, 10_000);
      assert.deepEqual(lines.filter((l) => l.path === '/v1/messages').map((l) => l.toolCallTruncated), [true, undefined]);
      assert.ok(g.logs.find((l) => l.level === 40 && /tool call cut/.test(l.msg) && /^chatcmpl-/.test(l.requestId)), 'the warn line names vLLM\'s request id');
      const metrics = await (await fetch(`${g.adminUrl}/metrics`)).text();
      assert.match(metrics, new RegExp(`warmroute_tool_calls_truncated_total\\{model="${DEFAULT_MODEL}"\\} 1\\b`));
    } finally {
      await g.close();
      await fleet.close();
    }
  });

  it('traces a Messages exchange as a chat, with its model, usage and time to first chunk', async () => {
    const fleet = await startFleet({ replicas: 1, ...FAST });
    const mem = new InMemorySpanExporter();
    const g = await startGateway(fleet.urls, { tracing: { tracesEndpoint: 'http://127.0.0.1:9/v1/traces', batch: { scheduledDelayMs: 5 } } }, { env: {}, traceExporter: mem });
    try {
      await ready(g);
      const res = await post(g, JSON.stringify({ model: DEFAULT_MODEL, max_tokens: 32, stream: true, messages: [{ role: 'user', content: 'Hi' }] }));
      await res.body.text();
      await waitFor('the SERVER span', () => mem.getFinishedSpans().some((s) => s.kind === SpanKind.SERVER && s.name === 'POST /v1/messages'), 10_000);
      const span = mem.getFinishedSpans().find((s) => s.kind === SpanKind.SERVER && s.name === 'POST /v1/messages')!;
      assert.equal(span.attributes['gen_ai.operation.name'], 'chat');
      assert.equal(span.attributes['gen_ai.request.model'], DEFAULT_MODEL);
      assert.equal(span.attributes['http.route'], '/v1/messages');
      assert.ok(Number(span.attributes['gen_ai.usage.input_tokens']) > 0);
      assert.ok(Number(span.attributes['gen_ai.usage.output_tokens']) > 0);
      assert.ok(Number(span.attributes['gen_ai.response.time_to_first_chunk']) > 0);
    } finally {
      await g.close();
      await fleet.close();
    }
  });
});
