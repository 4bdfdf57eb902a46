/**
 * Property fuzz of the data plane (fast-check, bounded in time): random methods, paths, headers,
 * bodies and chunkings, written as raw bytes. Whatever a client sends, the gateway answers — never
 * a 5xx for the client's own mistake, always an OpenAI-shaped error body for a refusal — and the
 * process neither crashes nor leaks.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import fc from 'fast-check';
import { startFixture, type FixtureUpstream } from '../helpers/fixture-upstream.js';
import { chatBody, startGateway, type TestGateway } from '../helpers/gateway.js';

const BASES = ['/v1/chat/completions', '/v1/completions', '/v1/models', '/v1/embeddings', '/v1/responses', '/', '/admin/replicas', '/metrics', '/v2/chat'];
const SEGMENTS = ['', '.', '..', '%2e%2e', '%2E', '%2f', '%5c', '%00', '%25', 'x', 'v1', 'chat', '\\..', '?a=1', '?'];

const path = fc.tuple(fc.constantFrom(...BASES), fc.array(fc.constantFrom(...SEGMENTS), { maxLength: 3 }))
  .map(([base, segs]) => base + segs.map((s) => (s.startsWith('?') ? s : `/${s}`)).join(''));

const printable = fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: 40 });

const headers = fc.record({
  contentType: fc.option(fc.constantFrom('application/json', 'application/json; charset=utf-8', 'text/plain', 'application/x-www-form-urlencoded', 'application/vnd.api+json', ''), { nil: undefined }),
  session: fc.option(printable, { nil: undefined }),
  extra: fc.array(fc.tuple(fc.constantFrom('x-a', 'connection', 'expect', 'te', 'x-forwarded-for', 'cookie', 'authorization'), printable), { maxLength: 3 }),
});

const deep = fc.integer({ min: 100, max: 3000 }).map((n) => `{"model":"fixture-model","messages":[{"role":"user","content":${'['.repeat(n)}${']'.repeat(n)}}]}`);

const body = fc.oneof(
  fc.constant(chatBody({ stream: false })),
  fc.json().map((j) => j),
  fc.record({ model: fc.oneof(fc.constant('fixture-model'), printable, fc.integer()), messages: fc.oneof(fc.constant([]), fc.array(fc.jsonValue(), { maxLength: 4 }), printable), stream: fc.oneof(fc.boolean(), fc.constant('yes'), fc.constant(undefined)) }).map((o) => JSON.stringify(o)),
  fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b)),
  deep,
  fc.constant(''),
);

const request = fc.record({
  method: fc.constantFrom('GET', 'POST', 'POST', 'POST', 'PUT', 'DELETE', 'HEAD', 'OPTIONS'),
  path,
  headers,
  body,
  chunked: fc.boolean(),
  cuts: fc.array(fc.nat({ max: 400 }), { maxLength: 6 }),
});

type Req = typeof request extends fc.Arbitrary<infer T> ? T : never;

/** The request as bytes, split at `cuts`; the answer's status line and body (connection: close). */
function send(port: number, r: Req): Promise<{ status: number; text: string }> {
  const payload = Buffer.isBuffer(r.body) ? r.body : Buffer.from(r.body);
  const head = [`${r.method} ${r.path} HTTP/1.1`, 'host: gateway', 'connection: close'];
  if (r.headers.contentType !== undefined) head.push(`content-type: ${r.headers.contentType}`);
  if (r.headers.session !== undefined) head.push(`x-session-id: ${r.headers.session}`);
  for (const [k, v] of r.headers.extra) head.push(`${k}: ${v}`);
  let framed: Buffer;
  if (r.chunked) {
    head.push('transfer-encoding: chunked');
    const parts: Buffer[] = [];
    const cuts = [...new Set(r.cuts.filter((c) => c > 0 && c < payload.length))].sort((a, b) => a - b);
    let at = 0;
    for (const c of [...cuts, payload.length]) {
      if (c > at) parts.push(Buffer.from(`${(c - at).toString(16)}\r\n`), payload.subarray(at, c), Buffer.from('\r\n'));
      at = c;
    }
    parts.push(Buffer.from('0\r\n\r\n'));
    framed = Buffer.concat(parts);
  } else {
    head.push(`content-length: ${payload.length}`);
    framed = payload;
  }
  const bytes = Buffer.concat([Buffer.from(`${head.join('\r\n')}\r\n\r\n`), framed]);
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1');
    const got: Buffer[] = [];
    const timer = setTimeout(() => { s.destroy(); reject(new Error(`no answer to ${r.method} ${r.path}`)); }, 10_000);
    s.on('data', (d) => got.push(d));
    s.on('error', () => {});
    s.on('close', () => {
      clearTimeout(timer);
      const text = Buffer.concat(got).toString('latin1');
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), text });
    });
    // Written in pieces at the cut points too, so the gateway also sees the bytes arrive split.
    const writeCuts = [...new Set(r.cuts.map((c) => c % Math.max(1, bytes.length)))].sort((a, b) => a - b);
    let at = 0;
    for (const c of [...writeCuts, bytes.length]) {
      if (c > at) s.write(bytes.subarray(at, c));
      at = c;
    }
  });
}

describe('fuzz: whatever a client sends, the gateway answers sensibly and stays up', () => {
  let a: FixtureUpstream;
  let g: TestGateway;
  const unhandled: unknown[] = [];
  const onUnhandled = (e: unknown) => unhandled.push(e);
  before(async () => {
    process.on('unhandledRejection', onUnhandled);
    a = await startFixture('fuzz');
    g = await startGateway([a.url], { limits: { bodyBytes: 64 * 1024, maxMessages: 64 } });
  });
  after(async () => {
    process.off('unhandledRejection', onUnhandled);
    await g.close();
    await a.close();
  });

  it('random requests: never a 5xx, refusals in OpenAI shape, no unhandled rejection, memory flat', { timeout: 120_000 }, async () => {
    const port = Number(new URL(g.url).port);
    const statuses = new Map<number, number>();
    const rssBefore = process.memoryUsage().rss;
    await fc.assert(fc.asyncProperty(request, async (r) => {
      const { status, text } = await send(port, r);
      statuses.set(status, (statuses.get(status) ?? 0) + 1);
      assert.ok(status >= 200 && status < 500, `${r.method} ${r.path} → ${status}\n${text.slice(0, 300)}`);
      if (status >= 400 && r.method !== 'HEAD') assert.match(text, /"error":\{"message":"(?:[^"\\]|\\.)+","type":"\w+_error"/, `${status} without an OpenAI error body`);
    }), { numRuns: 1000, interruptAfterTimeLimit: 30_000, seed: 42 });
    // The gateway still serves, and the fuzz did not grow the process.
    const ok = await send(port, { method: 'POST', path: '/v1/chat/completions', headers: { contentType: 'application/json', session: undefined, extra: [] }, body: chatBody({ stream: false }), chunked: false, cuts: [] });
    assert.equal(ok.status, 200);
    assert.deepEqual(unhandled, []);
    const grownMb = (process.memoryUsage().rss - rssBefore) / 1e6;
    assert.ok(grownMb < 150, `RSS grew by ${grownMb.toFixed(0)} MB`);
    assert.ok([...statuses.keys()].some((s) => s >= 400) && (statuses.get(200) ?? 0) > 0, `a mix of answers: ${[...statuses]}`);
  });
});
