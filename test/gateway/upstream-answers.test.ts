/**
 * Issue 17: what the gateway makes of a replica's answers — which TTFT the cost model learns (#8),
 * how long a non-streamed generation may take before its headers (#10), informational 1xx answers
 * before the real one (#15) — and a lowered limit applied while a queue exists (#9). Real sockets.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { resolveConfig } from '../../src/config/load.js';
import { startFixture } from '../helpers/fixture-upstream.js';
import { accessLines, chatBody, startGateway, waitForAccess } from '../helpers/gateway.js';
import { rawResponse, sse, startRawReplica, type RawRequest } from '../helpers/raw-replica.js';
import { waitFor } from '../helpers/wait.js';

const JSON_HEADERS = { 'content-type': 'application/json' };
const delta = (d: object) => sse({ id: 'c1', object: 'chat.completion.chunk', choices: [{ index: 0, delta: d, finish_reason: null }] });
const scrape = async (adminUrl: string) => (await request(`${adminUrl}/metrics`)).body.text();
const samplesOf = (g: Awaited<ReturnType<typeof startGateway>>) => [...g.gw.router.stats().costByReplica.values()].reduce((n, c) => n + c.samples, 0);

/** A chunked SSE answer: `first` at once, `rest` after `lateMs`. */
function streamAnswer(req: RawRequest, first: string[], rest: string[], lateMs: number) {
  const s = req.socket;
  const chunk = (t: string) => `${Buffer.byteLength(t).toString(16)}\r\n${t}\r\n`;
  s.write('HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n');
  s.write(first.map(chunk).join(''));
  setTimeout(() => s.write(`${rest.map(chunk).join('')}${chunk('data: [DONE]\n\n')}0\r\n\r\n`), lateMs);
}

describe('issue 17 #8: the first token is the first content, reasoning or tool-call delta; non-streamed requests feed no TTFT', () => {
  it('reasoning and tool-call deltas end the TTFT and the access line says which; a non-streamed answer teaches the cost model nothing', async () => {
    const replica = await startRawReplica((req) => {
      const body = JSON.parse(req.body.toString()) as { stream?: boolean };
      if (!body.stream) {
        const text = JSON.stringify({ id: 'x', object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }], usage: { prompt_tokens: 10, completion_tokens: 1, total_tokens: 11 } });
        setTimeout(() => req.socket.write(rawResponse(200, [['content-type', 'application/json'], ['content-length', String(text.length)]], text)), 50);
        return;
      }
      const role = delta({ role: 'assistant', content: '' });
      const late = [delta({ content: 'the answer' })];
      if (req.headers['x-first'] === 'reasoning') streamAnswer(req, [role, delta({ reasoning_content: 'let me think' })], late, 400);
      else if (req.headers['x-first'] === 'tool') streamAnswer(req, [role, delta({ tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'f', arguments: '' } }] })], late, 400);
      else streamAnswer(req, [role], late, 20);
    });
    const g = await startGateway([replica.url]);
    try {
      for (let i = 0; i < 3; i++) {
        const res = await request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: { ...JSON_HEADERS, 'x-session-id': `unstreamed-${i}` }, body: chatBody({ stream: false }) });
        assert.equal(res.statusCode, 200);
        await res.body.text();
      }
      const unstreamed = await waitForAccess(g, (ls) => ls.length >= 3);
      for (const l of unstreamed) {
        assert.equal(l.ttftMs, undefined, 'a whole body has no time to first token');
        assert.equal(l.firstToken, undefined);
      }
      assert.equal(samplesOf(g), 0, 'the cost model learned nothing from non-streamed answers');

      for (const first of ['reasoning', 'tool', 'content']) {
        const res = await request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: { ...JSON_HEADERS, 'x-first': first, 'x-session-id': `streamed-${first}` }, body: chatBody() });
        assert.match(await res.body.text(), /\[DONE\]/);
      }
      const lines = (await waitForAccess(g, (ls) => ls.length >= 6)).slice(3);
      assert.deepEqual(lines.map((l) => l.firstToken), ['reasoning', 'tool_call', 'content']);
      for (const l of lines.slice(0, 2)) assert.ok(l.ttftMs < 350, `the TTFT ends at the first reasoning/tool-call delta, not the content 400 ms later: ${l.ttftMs} ms`);
      assert.ok(samplesOf(g) > 0, 'streamed answers do teach the cost model (the positive control)');
    } finally {
      await g.close();
      await replica.close();
    }
  });
});

describe('issue 17 #10: a long non-streamed generation is neither cut at headersMs nor held against its replica', () => {
  it('headers 1.5 s after the request pass under headersMs 200; its own bound\'s timeouts never eject', async () => {
    const a = await startFixture('a');
    const long = await startGateway([a.url], { timeouts: { headersMs: 200 }, limits: { maxRetries: 0 }, outlier: { consecutiveErrors: 1 } });
    try {
      const res = await request(`${long.url}/v1/chat/completions`, { method: 'POST', headers: { 'x-fixture-gap-ms': '1500' }, body: chatBody({ stream: false }) });
      assert.equal(res.statusCode, 200, 'a non-streamed answer is bounded by timeouts.unstreamedHeadersMs, not headersMs');
      await res.body.text();
    } finally {
      await long.close();
    }
    const g = await startGateway([a.url], { timeouts: { headersMs: 200, unstreamedHeadersMs: 300 }, limits: { maxRetries: 0 }, outlier: { consecutiveErrors: 2 } });
    try {
      for (let i = 0; i < 3; i++) {
        const res = await request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: { 'x-fixture-gap-ms': '1500' }, body: chatBody({ stream: false }) });
        assert.equal(res.statusCode, 504);
        assert.equal(((await res.body.json()) as { error: { code: string } }).error.code, 'upstream_timeout');
      }
      const r = g.gw.registry.replicas[0];
      assert.equal(r.consecutiveErrors, 0, 'no timeout of a non-streamed generation counts toward ejection');
      assert.equal(r.ejectedUntil, 0);
      const ok = await request(`${g.url}/v1/chat/completions`, { method: 'POST', body: chatBody() });
      assert.equal(ok.statusCode, 200);
      await ok.body.text();
    } finally {
      await g.close();
      await a.close();
    }
  });
});

describe('issue 17 #15: informational answers from a replica are skipped and the final answer relayed', () => {
  it('102 and 103 before a 200 are skipped; a replica that sends an unsolicited 100 fails over before any byte', async () => {
    const body = '{"id":"x","object":"chat.completion","choices":[]}';
    const answer = (req: RawRequest, info: string) => {
      req.socket.write(info);
      setTimeout(() => req.socket.write(rawResponse(200, [['content-type', 'application/json'], ['content-length', String(body.length)]], body)), 30);
    };
    const hints = await startRawReplica((req) => answer(req, req.headers['x-info'] === '102'
      ? 'HTTP/1.1 102 Processing\r\n\r\n'
      : 'HTTP/1.1 103 Early Hints\r\nlink: </style.css>; rel=preload\r\n\r\n'));
    // undici refuses a 100 nobody asked for (the gateway never forwards Expect, so a conforming
    // replica sends none): it is a failure before the response, and the next replica answers.
    const continues = await startRawReplica((req) => answer(req, 'HTTP/1.1 100 Continue\r\n\r\n'));
    const g = await startGateway([hints.url], { limits: { maxRetries: 0 } });
    const pair = await startGateway([continues.url, hints.url], { routing: { strategy: 'round-robin' }, limits: { maxRetries: 1 } });
    try {
      for (const info of ['103', '102']) {
        const res = await request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: { ...JSON_HEADERS, 'x-info': info }, body: chatBody({ stream: false }) });
        assert.equal(res.statusCode, 200, `after a ${info}`);
        assert.equal(await res.body.text(), body);
      }
      const lines = await waitForAccess(g, (ls) => ls.length >= 2);
      assert.deepEqual(lines.map((l) => [l.status, l.outcome]), [[200, 'complete'], [200, 'complete']]);
      for (let i = 0; i < 2; i++) {
        const res = await request(`${pair.url}/v1/chat/completions`, { method: 'POST', headers: JSON_HEADERS, body: chatBody({ stream: false }) });
        assert.equal(res.statusCode, 200);
        assert.equal(await res.body.text(), body);
      }
    } finally {
      await g.close();
      await pair.close();
      await hints.close();
      await continues.close();
    }
  });
});

describe('issue 17 #9: a limit lowered on reload applies while requests are queued', () => {
  it('limits.maxConcurrent 2 → 1 with one waiting: the first slot released does not let it in, the second does', async () => {
    const a = await startFixture('a');
    const raw = { limits: { maxConcurrent: 2, maxQueued: 4 }, timeouts: { queueMs: 20_000 } };
    const g = await startGateway([a.url], raw);
    try {
      const h1 = await request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: { 'x-fixture-hold': 'h1' }, body: chatBody() });
      const h2 = await request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: { 'x-fixture-hold': 'h2' }, body: chatBody() });
      const waiting = request(`${g.url}/v1/chat/completions`, { method: 'POST', body: chatBody() });
      await waitFor('one request in the gateway-wide queue', async () => /warmroute_global_queued 1\b/.test(await scrape(g.adminUrl)));
      g.gw.reconfigure(resolveConfig({ ...raw, upstreams: [{ url: a.url }], limits: { maxConcurrent: 1, maxQueued: 4 } }));
      assert.ok(a.release('h1'));
      await h1.body.text();
      await waitForAccess(g, (ls) => ls.length >= 1);
      // Give a wrongly admitted waiter every chance to show.
      await new Promise((r) => setTimeout(r, 100));
      const m = await scrape(g.adminUrl);
      assert.match(m, /warmroute_global_inflight 1\b/, 'one open under the new limit of 1');
      assert.match(m, /warmroute_global_queued 1\b/, 'the waiter still waits');
      assert.equal(accessLines(g.logs).length, 1);
      assert.ok(a.release('h2'));
      await h2.body.text();
      const third = await waiting;
      assert.equal(third.statusCode, 200, 'admitted once fewer than the new limit are open');
      await third.body.text();
    } finally {
      a.release('h1');
      a.release('h2');
      await g.close();
      await a.close();
    }
  });
});
