import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { DEFAULT_MODEL, startFleet, type SimFleet } from '../../bench/sim/index.js';
import { startFixture, type FixtureUpstream } from '../helpers/fixture-upstream.js';
import { accessLines, startGateway, waitForAccess, type TestGateway } from '../helpers/gateway.js';
import { rawResponse, sse, startRawReplica } from '../helpers/raw-replica.js';

const TOOLS = [{
  type: 'function',
  function: {
    name: 'update_booking',
    description: 'Change a booking',
    parameters: { type: 'object', properties: { date: { type: 'string' }, seats: { type: 'integer' }, note: { type: 'string' }, city: { type: 'string' } } },
  },
}];
const NAMED = { type: 'function', function: { name: 'update_booking' } };

function toolTurn(extra: Record<string, unknown>): string {
  return JSON.stringify({
    model: DEFAULT_MODEL,
    messages: [{ role: 'system', content: 'You book tables.' }, { role: 'user', content: 'Please call update_booking: two seats, Friday.' }],
    tools: TOOLS,
    tool_choice: NAMED,
    ...extra,
  });
}

async function scrape(adminUrl: string): Promise<string> {
  return (await request(`${adminUrl}/metrics`)).body.text();
}

async function post(g: TestGateway, body: string, headers: Record<string, string> = {}) {
  const res = await request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  return { status: res.statusCode, headers: res.headers, text: await res.body.text() };
}

describe('tool-call guard: a tool call cut by the token limit is detected', () => {
  let fleet: SimFleet;
  let g: TestGateway;
  before(async () => {
    fleet = await startFleet({ replicas: 1 });
    // Prevention off: the requests below reach the replica with their own small max_tokens.
    g = await startGateway(fleet.urls, { tools: { minMaxTokens: 0 } });
  });
  after(async () => { await g.close(); await fleet.close(); });

  it('streamed: counted by model, a warn line with the request id, marked in the access line; a whole call is not', async () => {
    const cut = await post(g, toolTurn({ max_tokens: 12, stream: true }));
    assert.equal(cut.status, 200);
    assert.match(cut.text, /"finish_reason":"length"/, 'the simulator cut the call on its length');
    const id = /"id":"(chatcmpl-[^"]+)"/.exec(cut.text)![1];
    let [line] = await waitForAccess(g, (ls) => ls.length >= 1);
    assert.equal(line.toolCallTruncated, true);
    const warn = g.logs.find((l) => l.level === 40 && /tool call cut/.test(l.msg));
    assert.ok(warn, 'a warn line says so');
    assert.equal(warn.requestId, id);
    assert.match(await scrape(g.adminUrl), new RegExp(`warmroute_tool_calls_truncated_total\\{model="${DEFAULT_MODEL}"\\} 1\\b`));

    const whole = await post(g, toolTurn({ stream: true }));
    assert.match(whole.text, /"finish_reason":"stop"/);
    [, line] = await waitForAccess(g, (ls) => ls.length >= 2);
    assert.equal(line.toolCallTruncated, undefined);
    assert.match(await scrape(g.adminUrl), new RegExp(`warmroute_tool_calls_truncated_total\\{model="${DEFAULT_MODEL}"\\} 1\\b`));
  });

  it('unstreamed: the body\'s cut arguments are found too; a length ending without a tool call is not one', async () => {
    const before = accessLines(g.logs).length;
    const cut = await post(g, toolTurn({ max_tokens: 12 }));
    const body = JSON.parse(cut.text) as { choices: { finish_reason: string; message: { tool_calls: { function: { arguments: string } }[] } }[] };
    assert.equal(body.choices[0].finish_reason, 'length');
    assert.throws(() => JSON.parse(body.choices[0].message.tool_calls[0].function.arguments), 'the arguments are open');
    const plain = await post(g, JSON.stringify({ model: DEFAULT_MODEL, max_tokens: 3, tools: TOOLS, tool_choice: 'none', messages: [{ role: 'user', content: 'Say something long' }] }));
    assert.match(plain.text, /"finish_reason":"length"/);
    const lines = (await waitForAccess(g, (ls) => ls.length >= before + 2)).slice(before);
    assert.deepEqual(lines.map((l) => l.toolCallTruncated), [true, undefined]);
    assert.match(await scrape(g.adminUrl), new RegExp(`warmroute_tool_calls_truncated_total\\{model="${DEFAULT_MODEL}"\\} 2\\b`));
  });
});

describe('tool-call guard: a forced call cut on its length is caught without any tool_calls sent (vLLM 0.32 with the hermes parser)', () => {
  it('streamed and unstreamed: tool_choice named or "required" ending on "length" counts; "auto" with the same answer does not', async () => {
    // What a real vLLM replica answered to a named tool_choice with max_tokens 12: the parser held the
    // cut call back, so the stream has no tool_calls at all and the body has the call's opening markup as content.
    const id = 'chatcmpl-a9dafbf9c90c2fb8';
    const stream = `${sse({ id, object: 'chat.completion.chunk', choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] })}${sse({ id, object: 'chat.completion.chunk', choices: [{ index: 0, delta: {}, finish_reason: 'length' }] })}data: [DONE]\n\n`;
    const whole = JSON.stringify({ id, object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: '<tool_call>{' }, finish_reason: 'length' }] });
    const replica = await startRawReplica((req) => {
      const streamed = JSON.parse(req.body.toString()).stream === true;
      const body = streamed ? stream : whole;
      req.socket.write(rawResponse(200, [['content-type', streamed ? 'text/event-stream' : 'application/json'], ['content-length', String(Buffer.byteLength(body))]], body));
    });
    const g = await startGateway([replica.url], { tools: { minMaxTokens: 0 } });
    try {
      const turn = (extra: Record<string, unknown>) => JSON.stringify({ model: 'fixture-model', messages: [{ role: 'user', content: 'book it' }], tools: TOOLS, max_tokens: 12, ...extra });
      for (const body of [turn({ tool_choice: NAMED, stream: true }), turn({ tool_choice: 'required' }), turn({ tool_choice: 'auto', stream: true }), turn({})]) assert.equal((await post(g, body)).status, 200);
      const lines = await waitForAccess(g, (ls) => ls.length >= 4);
      assert.deepEqual(lines.map((l) => l.toolCallTruncated), [true, true, undefined, undefined]);
      const warns = g.logs.filter((l) => l.level === 40 && /tool call cut/.test(l.msg));
      assert.deepEqual(warns.map((l) => l.requestId), [id, id]);
    } finally {
      await g.close();
      await replica.close();
    }
  });
});

describe('tool-call guard: tools.minMaxTokens raises a too-small limit (default 256)', () => {
  let fleet: SimFleet;
  let fixture: FixtureUpstream;
  let g: TestGateway;
  let gf: TestGateway;
  before(async () => {
    fleet = await startFleet({ replicas: 1 });
    fixture = await startFixture('a');
    g = await startGateway(fleet.urls);
    gf = await startGateway([fixture.url]);
  });

  it('its counter is exported at 0 before any request', async () => {
    const fresh = await startGateway([fixture.url]);
    try {
      const text = await scrape(fresh.adminUrl);
      for (const field of ['max_tokens', 'max_completion_tokens']) assert.match(text, new RegExp(`warmroute_tool_max_tokens_raised_total\\{field="${field}"\\} 0\\b`));
    } finally {
      await fresh.close();
    }
  });
  after(async () => { await g.close(); await gf.close(); await fleet.close(); await fixture.close(); });

  it('the call the limit would have cut comes back whole, with x-warmroute-adjusted, a counter and one warn line per caller', async () => {
    const sessionA = { 'x-session-id': 'caller-a' };
    const first = await post(g, toolTurn({ max_tokens: 12, stream: true }), sessionA);
    assert.equal(first.headers['x-warmroute-adjusted'], 'max_tokens=256');
    assert.match(first.text, /"finish_reason":"stop"/, 'raised, the call completed');
    const second = await post(g, toolTurn({ max_completion_tokens: 12 }), sessionA);
    assert.equal(second.headers['x-warmroute-adjusted'], 'max_completion_tokens=256');
    await post(g, toolTurn({ max_tokens: 12 }), { 'x-session-id': 'caller-b' });
    const lines = await waitForAccess(g, (ls) => ls.length >= 3);
    assert.deepEqual(lines.map((l) => l.adjusted), ['max_tokens=256', 'max_completion_tokens=256', 'max_tokens=256']);
    assert.ok(lines.every((l) => l.toolCallTruncated === undefined));
    const warns = g.logs.filter((l) => l.level === 40 && /asked for too few tokens/.test(l.msg));
    assert.equal(warns.length, 2, 'one warn line per session, not per request');
    const metrics = await scrape(g.adminUrl);
    assert.match(metrics, /warmroute_tool_max_tokens_raised_total\{field="max_tokens"\} 2\b/);
    assert.match(metrics, /warmroute_tool_max_tokens_raised_total\{field="max_completion_tokens"\} 1\b/);
  });

  it('only a raised request is re-encoded: every other keeps its bytes, and the raised one keeps its other fields', async () => {
    // Spacing no JSON.stringify would write: a re-encoded body would lose it.
    const asSent = [
      `{ "model": "fixture-model", "messages": [ {"role": "user", "content": "hi"} ], "max_tokens": 12 }`,
      `{ "model": "fixture-model", "messages": [ {"role": "user", "content": "hi"} ], "tools": ${JSON.stringify(TOOLS)}, "max_tokens": 300 }`,
      `{ "model": "fixture-model", "messages": [ {"role": "user", "content": "hi"} ], "tools": ${JSON.stringify(TOOLS)} }`,
      `{ "model": "fixture-model", "messages": [ {"role": "user", "content": "hi"} ], "tools": [], "max_tokens": 5 }`,
    ];
    for (const body of asSent) {
      const from = fixture.seen.length;
      const r = await post(gf, body);
      assert.equal(r.status, 200);
      assert.equal(r.headers['x-warmroute-adjusted'], undefined);
      const seen = fixture.seen.slice(from).find((s) => s.url.endsWith('/completions'))!;
      assert.equal(seen.body.toString(), body, 'forwarded byte for byte');
    }
    const from = fixture.seen.length;
    const r = await post(gf, `{ "model": "fixture-model", "messages": [ {"role": "user", "content": "hi"} ], "tools": ${JSON.stringify(TOOLS)}, "max_tokens": 40, "temperature": 0.2 }`);
    assert.equal(r.headers['x-warmroute-adjusted'], 'max_tokens=256');
    const seen = JSON.parse(fixture.seen.slice(from).find((s) => s.url.endsWith('/completions'))!.body.toString()) as Record<string, unknown>;
    assert.equal(seen.max_tokens, 256);
    assert.equal(seen.temperature, 0.2);
    assert.deepEqual(seen.tools, TOOLS);
  });
});
