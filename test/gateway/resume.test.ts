import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { DEFAULT_MODEL, startReplica, type SimReplica } from '../../bench/sim/index.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';

const FAST = { frontendMs: 0.5, tokenizeMsPerToken: 0, stepBaseMs: 2, prefillMsPerToken: 0.001, attnMsPerTokenPair: 0, decodeMsPerSeq: 0, decodeMsPerCtxToken: 0, outputTokens: { min: 30, max: 30 } };

interface Chunk { id: string; choices: { delta: { role?: string; content?: string; tool_calls?: unknown[] } }[]; usage?: unknown; error?: unknown }

function events(text: string): (Chunk | '[DONE]')[] {
  return text.split('\n\n').filter((e) => e.startsWith('data: ')).map((e) => (e === 'data: [DONE]' ? '[DONE]' : JSON.parse(e.slice(6)) as Chunk));
}

describe('mid-stream resume (resume.enabled)', () => {
  let rs: SimReplica[];
  let g: TestGateway;
  before(async () => {
    rs = await Promise.all([0, 1].map(() => startReplica(FAST)));
    g = await startGateway(rs.map((r) => r.url), { resume: { enabled: true } });
  });
  after(async () => {
    await g.close();
    await Promise.all(rs.map((r) => r.close()));
  });

  const chat = (session: string, extra: Record<string, unknown> = {}) => request(`${g.url}/v1/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json', 'x-session-id': session },
    body: JSON.stringify({ model: DEFAULT_MODEL, stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'Tell me about the opening hours of the clinic.' }], ...extra }),
  });
  const homeOf = async (session: string) => {
    const res = await chat(session);
    await res.body.text();
    return rs.find((r) => String(res.headers['x-warmroute-replica']).endsWith(`:${r.port}`))!;
  };
  const resumes = async (outcome: string) => Number(new RegExp(`warmroute_stream_resumes_total\\{outcome="${outcome}"\\} (\\d+)`).exec(await (await request(`${g.adminUrl}/metrics`)).body.text())?.[1] ?? 0);

  it('a replica dies mid-answer: the next one continues it in the same stream, one coherent answer', async () => {
    const home = await homeOf('resume-1');
    home.fault({ kind: 'die-mid-stream', afterChunks: 5, times: 1 });
    const res = await chat('resume-1');
    assert.equal(res.statusCode, 200);
    const all = events(await res.body.text());
    assert.equal(all.at(-1), '[DONE]', 'the stream ends as a complete one');
    const chunks = all.filter((e): e is Chunk => e !== '[DONE]');
    assert.ok(chunks.every((c) => c.error === undefined), 'no error event');
    assert.equal(new Set(chunks.map((c) => c.id)).size, 1, 'one id for the whole answer');
    assert.equal(chunks.filter((c) => c.choices[0]?.delta.role !== undefined).length, 1, 'one role chunk');
    assert.equal(chunks.filter((c) => c.usage).length, 1, 'one usage chunk, at the end');
    assert.ok(chunks.at(-1)!.usage, 'usage is last');
    // More than the five the dying replica sent: the rest reached this stream.
    assert.ok(chunks.filter((c) => c.choices[0]?.delta.content).length > 5, 'the continuation reached the client');
    assert.equal(await resumes('resumed'), 1);
    const other = rs.find((r) => r !== home)!;
    assert.ok(other.requests().some((q) => q.status === 'ok'), 'the other replica wrote the rest');
  });

  it('a tool call is never resumed: the stream ends with an error event', async () => {
    const tools = [{ type: 'function', function: { name: 'book_slot', parameters: { type: 'object', properties: {} } } }];
    const body = { tools, messages: [{ role: 'user', content: 'Please call book_slot for tomorrow.' }] };
    const res0 = await chat('resume-2', body);
    await res0.body.text();
    const home = rs.find((r) => String(res0.headers['x-warmroute-replica']).endsWith(`:${r.port}`))!;
    home.fault({ kind: 'die-mid-stream', afterChunks: 2, times: 1 });
    const res = await chat('resume-2', body);
    const text = await res.body.text();
    assert.match(text, /"code":"upstream_stream_error"/);
    assert.equal(await resumes('tool_call'), 1);
  });
});

describe('mid-stream resume waiting for the next replica\'s slot (limits.maxInflightPerReplica)', () => {
  let rs: SimReplica[];
  let g: TestGateway;
  before(async () => {
    rs = await Promise.all([0, 1].map(() => startReplica(FAST)));
    g = await startGateway(rs.map((r) => r.url), { resume: { enabled: true }, limits: { maxInflightPerReplica: 1, maxQueuedPerReplica: 4 }, timeouts: { queueMs: 30_000, idleMs: 30_000 } });
  });
  after(async () => {
    await g.close();
    await Promise.all(rs.map((r) => r.close()));
  });

  const chat = (session: string, signal?: AbortSignal) => request(`${g.url}/v1/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json', 'x-session-id': session }, signal,
    body: JSON.stringify({ model: DEFAULT_MODEL, stream: true, messages: [{ role: 'user', content: 'Tell me about the opening hours of the clinic.' }] }),
  });
  const homeOf = async (session: string) => {
    const res = await chat(session);
    await res.body.text();
    return rs.find((r) => String(res.headers['x-warmroute-replica']).endsWith(`:${r.port}`))!;
  };
  const queuedOn = async (r: SimReplica) => Number(new RegExp(`warmroute_queued\\{replica="[^"]*:${r.port}"\\} (\\d+)`).exec(await (await request(`${g.adminUrl}/metrics`)).body.text())?.[1] ?? -1);

  it('a client that leaves while its continuation waits gives its place in that queue up at once', async () => {
    const home = await homeOf('wait-1');
    const other = rs.find((r) => r !== home)!;
    let occupier = '';
    for (let i = 0; occupier === ''; i++) if ((await homeOf(`occupy-${i}`)) === other) occupier = `occupy-${i}`;
    // The other replica's one slot is held by a stream that stops mid-way.
    other.fault({ kind: 'stall-mid-stream', afterChunks: 2, times: 1 });
    const holdOther = new AbortController();
    const held = await chat(occupier, holdOther.signal);
    held.body.on('error', () => {});
    // The home replica dies mid-answer: the continuation waits for the other's slot.
    home.fault({ kind: 'die-mid-stream', afterChunks: 3, times: 1 });
    const leave = new AbortController();
    const res = await chat('wait-1', leave.signal);
    res.body.on('error', () => {});
    res.body.resume();
    await waitFor('the continuation to wait for the other replica', async () => (await queuedOn(other)) === 1, 5_000);
    leave.abort();
    await waitFor('its place in the queue to be given up', async () => (await queuedOn(other)) === 0, 2_000);
    holdOther.abort();
  });
});
