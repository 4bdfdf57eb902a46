import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createResponseParser, ProtocolError, type ResponseHead } from '../../src/proxy/upstream/response-parser.js';

interface Parsed { heads: ResponseHead[]; body: string; ended: number; trailing: boolean; eofCompleted: boolean | null }

/** Feeds `wire` cut at `cuts` (offsets), then closes the connection when `eof`. */
function parse(wire: string, cuts: number[] = [], opts: { noBody?: boolean; eof?: boolean } = {}): Parsed {
  const out: Parsed = { heads: [], body: '', ended: 0, trailing: false, eofCompleted: null };
  const p = createResponseParser({
    onHead: (h) => { out.heads.push(h); return true; },
    onBody: (c) => { out.body += c.toString('latin1'); return true; },
    onEnd: () => { out.ended++; },
  }, { maxHeadBytes: 1024, noBody: opts.noBody ?? false });
  const bounds = [0, ...cuts, wire.length];
  for (let i = 0; i + 1 < bounds.length; i++) p.execute(Buffer.from(wire.slice(bounds[i], bounds[i + 1]), 'latin1'));
  if (opts.eof) out.eofCompleted = p.eof();
  out.trailing = p.trailing;
  return out;
}

/** Every way of cutting `wire` in two, and in three at a stride: framing must not depend on reads. */
function everySplit(wire: string, check: (r: Parsed, where: string) => void, opts: { eof?: boolean } = {}) {
  check(parse(wire, [], opts), 'whole');
  for (let i = 1; i < wire.length; i++) check(parse(wire, [i], opts), `cut at ${i}`);
  for (let i = 1; i < wire.length; i += 3) for (let j = i + 1; j < wire.length; j += 5) check(parse(wire, [i, j], opts), `cut at ${i},${j}`);
}

const SSE = 'data: {"choices":[{"delta":{"content":"Hi"}}]}\n\ndata: [DONE]\n\n';
const chunked = (parts: string[]) => parts.map((p) => `${p.length.toString(16)}\r\n${p}\r\n`).join('') + '0\r\n\r\n';

describe('upstream response parser', () => {
  it('content-length body, whatever the reads', () => {
    const wire = `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{"ok":true}`;
    everySplit(wire, (r, where) => {
      assert.equal(r.heads.length, 1, where);
      assert.equal(r.heads[0].status, 200);
      assert.deepEqual(r.heads[0].headers, ['Content-Type', 'application/json', 'Content-Length', '11']);
      assert.equal(r.heads[0].keepAlive, true);
      assert.equal(r.body, '{"ok":true}', where);
      assert.equal(r.ended, 1, where);
      assert.equal(r.trailing, false);
    });
  });

  it('chunked body (SSE), with extensions and trailers, whatever the reads', () => {
    const parts = [SSE.slice(0, 20), SSE.slice(20)];
    const body = `${parts[0].length.toString(16)};ext=1\r\n${parts[0]}\r\n${parts[1].length.toString(16)}\r\n${parts[1]}\r\n0\r\nx-trailer: 1\r\n\r\n`;
    const wire = `HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n${body}`;
    everySplit(wire, (r, where) => {
      assert.equal(r.body, SSE, where);
      assert.equal(r.ended, 1, where);
      assert.equal(r.heads[0].keepAlive, true);
    });
  });

  it('a body until the connection closes, when neither length nor chunked is given', () => {
    const wire = 'HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nhello world';
    everySplit(wire, (r, where) => {
      assert.equal(r.body, 'hello world', where);
      assert.equal(r.eofCompleted, true);
      assert.equal(r.ended, 1);
      assert.equal(r.heads[0].keepAlive, false);
    }, { eof: true });
  });

  it('a close before a length-framed body is complete does not complete it', () => {
    const r = parse('HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc', [], { eof: true });
    assert.equal(r.eofCompleted, false);
    assert.equal(r.ended, 0);
  });

  it('interim 1xx responses are skipped; the real head follows', () => {
    const wire = 'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </x>\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok';
    everySplit(wire, (r, where) => {
      assert.equal(r.heads.length, 1, where);
      assert.equal(r.heads[0].status, 200);
      assert.equal(r.body, 'ok');
    });
  });

  const keepAliveCases: { name: string; head: string; keepAlive: boolean; hint?: number | null }[] = [
    { name: 'HTTP/1.1 by default', head: 'HTTP/1.1 200 OK\r\ncontent-length: 0', keepAlive: true },
    { name: 'connection: close', head: 'HTTP/1.1 200 OK\r\nConnection: close\r\ncontent-length: 0', keepAlive: false },
    { name: 'HTTP/1.0 by default', head: 'HTTP/1.0 200 OK\r\ncontent-length: 0', keepAlive: false },
    { name: 'HTTP/1.0 with keep-alive', head: 'HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ncontent-length: 0', keepAlive: true },
    { name: 'transfer-encoding with content-length', head: 'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-length: 5', keepAlive: false },
    { name: 'a keep-alive timeout hint', head: 'HTTP/1.1 200 OK\r\nkeep-alive: timeout=5\r\ncontent-length: 0', keepAlive: true, hint: 5 },
  ];
  for (const c of keepAliveCases) {
    it(`keep-alive: ${c.name} → ${c.keepAlive}`, () => {
      const r = parse(`${c.head}\r\n\r\n${c.head.includes('chunked') ? '0\r\n\r\n' : ''}`);
      assert.equal(r.heads[0].keepAlive, c.keepAlive);
      if (c.hint !== undefined) assert.equal(r.heads[0].keepAliveHintS, c.hint);
      assert.equal(r.ended, 1);
    });
  }

  it('no body for 204, 304 and HEAD, even with a length', () => {
    for (const [wire, noBody] of [['HTTP/1.1 204 No Content\r\n\r\n', false], ['HTTP/1.1 304 Not Modified\r\ncontent-length: 5\r\n\r\n', false], ['HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n', true]] as const) {
      const r = parse(wire, [], { noBody });
      assert.equal(r.ended, 1, wire);
      assert.equal(r.body, '');
    }
  });

  it('bytes after the end of a response mark the connection unusable', () => {
    const r = parse('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nokEXTRA');
    assert.equal(r.body, 'ok');
    assert.equal(r.trailing, true);
  });

  const bad: { name: string; wire: string }[] = [
    { name: 'not HTTP', wire: 'SSH-2.0-OpenSSH\r\n\r\n' },
    { name: 'HTTP/2 preface', wire: 'HTTP/2 200\r\n\r\n' },
    { name: 'a header line without a colon', wire: 'HTTP/1.1 200 OK\r\nbroken\r\n\r\n' },
    { name: 'obsolete line folding', wire: 'HTTP/1.1 200 OK\r\nx: a\r\n b\r\n\r\n' },
    { name: 'a space in a header name', wire: 'HTTP/1.1 200 OK\r\nbad name: 1\r\n\r\n' },
    { name: 'a non-numeric content-length', wire: 'HTTP/1.1 200 OK\r\ncontent-length: 1x\r\n\r\n' },
    { name: 'differing content-lengths', wire: 'HTTP/1.1 200 OK\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\n' },
    { name: 'a bad chunk size', wire: 'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n' },
    { name: 'chunk data not followed by CRLF', wire: 'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nokX' },
    { name: '101 switching protocols', wire: 'HTTP/1.1 101 Switching Protocols\r\n\r\n' },
    { name: 'a head over the limit', wire: `HTTP/1.1 200 OK\r\nx: ${'a'.repeat(2000)}\r\n\r\n` },
    { name: 'a head over the limit, never terminated', wire: `HTTP/1.1 200 OK\r\nx: ${'a'.repeat(2000)}` },
  ];
  for (const c of bad) {
    it(`rejects ${c.name}`, () => {
      assert.throws(() => parse(c.wire), ProtocolError);
      assert.throws(() => parse(c.wire, [7]), ProtocolError);
    });
  }

  it('matching repeated content-length values are one length', () => {
    const r = parse('HTTP/1.1 200 OK\r\ncontent-length: 2, 2\r\n\r\nok');
    assert.equal(r.body, 'ok');
  });

  it('stops for good when the exchange is given up in onHead or onBody', () => {
    let bodies = 0;
    const p = createResponseParser({ onHead: () => true, onBody: () => { bodies++; return false; }, onEnd: () => assert.fail('no end after a stop') }, { maxHeadBytes: 1024, noBody: false });
    p.execute(Buffer.from(`HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n${chunked(['a', 'b', 'c'])}`));
    assert.equal(bodies, 1);
  });
});
