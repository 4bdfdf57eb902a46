/**
 * The fault suite's client judges a streamed chat completion from the client's side: completed only
 * for a whole event stream (200, text/event-stream, [DONE]); explicit for an OpenAI error body with
 * an error status or an error event; silent for anything else, however parseable.
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { send, type Ending } from '../../bench/chaos/client.js';

const BODY = JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] });
const SSE = { 'content-type': 'text/event-stream' };
const JSON_CT = { 'content-type': 'application/json' };
const chunk = `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: 'x' } }] })}\n\n`;
const errorBody = JSON.stringify({ error: { message: 'no replica', type: 'server_error', param: null, code: 'upstream_unavailable' } });

/** What the server answers, by the request's x-case header. */
const CASES: Record<string, { ending: Ending; detail?: RegExp; answer(res: ServerResponse): void }> = {
  'whole stream': { ending: 'completed', answer: (res) => { res.writeHead(200, SSE); res.end(`${chunk}data: [DONE]\n\n`); } },
  'stream without [DONE]': { ending: 'silent', detail: /without \[DONE\]/, answer: (res) => { res.writeHead(200, SSE); res.end(chunk); } },
  'error event': { ending: 'explicit', detail: /error event/, answer: (res) => { res.writeHead(200, SSE); res.end(`${chunk}\n\ndata: ${errorBody}\n\n`); } },
  'error event, spaced JSON': { ending: 'explicit', detail: /error event/, answer: (res) => { res.writeHead(200, SSE); res.end(`${chunk}data: { "error" : { "message": "cut" } }\n\n`); } },
  'text that only starts like an error': { ending: 'silent', answer: (res) => { res.writeHead(200, SSE); res.end(`${chunk}data: {"error"\n\n`); } },
  '200 JSON body': { ending: 'silent', detail: /where an event stream was asked for/, answer: (res) => { res.writeHead(200, JSON_CT); res.end('{"id":"x","choices":[]}'); } },
  '200 JSON error body': { ending: 'silent', detail: /HTTP 200/, answer: (res) => { res.writeHead(200, JSON_CT); res.end(errorBody); } },
  '204': { ending: 'silent', detail: /HTTP 204/, answer: (res) => { res.writeHead(204); res.end(); } },
  '302': { ending: 'silent', detail: /HTTP 302/, answer: (res) => { res.writeHead(302, { location: '/elsewhere', ...JSON_CT }); res.end('{}'); } },
  '502 with an error body': { ending: 'explicit', detail: /^upstream_unavailable$/, answer: (res) => { res.writeHead(502, JSON_CT); res.end(errorBody); } },
  '500 with an empty body': { ending: 'silent', detail: /without an error body/, answer: (res) => { res.writeHead(500); res.end(); } },
  '500 with a non-error JSON body': { ending: 'silent', detail: /without an error body/, answer: (res) => { res.writeHead(500, JSON_CT); res.end('{"detail":"x"}'); } },
  'event stream with 201': { ending: 'silent', answer: (res) => { res.writeHead(201, SSE); res.end(`${chunk}data: [DONE]\n\n`); } },
};

describe('chaos client: how a stream request ended', () => {
  let url = '';
  const server = createServer((req: IncomingMessage, res) => {
    req.resume();
    req.on('end', () => CASES[String(req.headers['x-case'])].answer(res));
  });
  before(async () => {
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }));

  for (const [name, c] of Object.entries(CASES)) {
    it(`${name}: ${c.ending}`, async () => {
      const e = await send(url, BODY, { headers: { 'x-case': name }, deadlineMs: 5_000 });
      assert.equal(e.ending, c.ending, `${name}: ${JSON.stringify(e)}`);
      if (c.detail) assert.match(e.detail, c.detail);
    });
  }

  it('refuses a request that does not ask for a stream', async () => {
    await assert.rejects(send(url, JSON.stringify({ model: 'm', messages: [] })), /stream requests only/);
  });
});
