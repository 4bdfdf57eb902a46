/**
 * A guard on the work the request path does per streamed chunk, by count rather than by time:
 * 10,000 chunks through the tap, and through an upstream attempt's handler into the client's
 * response, with the calls that cost (regular expressions, JSON.parse, Buffer copies and decodes,
 * clock reads, writes) counted. Per-chunk work that grows (a second decode, a regex per event after
 * the first token, a copy per chunk, a clock read per chunk) fails here, on any machine.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import type { Dispatcher } from 'undici';
import { createTap } from '../../src/stream/tap.js';
import { startClock } from '../../src/telemetry/hop-clock.js';
import { AnswerAttempt, type AttemptHost } from '../../src/upstream/attempt.js';
import { ClientRelay } from '../../src/upstream/relay.js';

const CHUNKS = 10_000;
const event = (content: string) => `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":${JSON.stringify(content)}},"finish_reason":null}]}\n\n`;
const FIRST = Buffer.from(`data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n${event('Hello')}`);
const CHUNK = Buffer.from(event(' word'));
// An event split across two reads, as TCP may deliver it.
const HALF_A = CHUNK.subarray(0, 40);
const HALF_B = CHUNK.subarray(40);
const END = Buffer.from('data: {"id":"c1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":10001,"total_tokens":10013,"prompt_tokens_details":{"cached_tokens":8}}}\n\ndata: [DONE]\n\n');

type Counted = 'regex' | 'jsonParse' | 'bufferToString' | 'bufferFrom' | 'bufferConcat' | 'bufferAlloc' | 'clock';

/** Runs `f` with the costly calls counted (prototype methods wrapped, restored after). */
function counting(f: () => void): Record<Counted, number> {
  const n: Record<Counted, number> = { regex: 0, jsonParse: 0, bufferToString: 0, bufferFrom: 0, bufferConcat: 0, bufferAlloc: 0, clock: 0 };
  const restore: (() => void)[] = [];
  const wrap = <T extends object>(target: T, key: keyof T & string, what: Counted) => {
    const original = target[key] as unknown as (...a: unknown[]) => unknown;
    (target as Record<string, unknown>)[key] = function (this: unknown, ...a: unknown[]) { n[what]++; return original.apply(this, a); };
    restore.push(() => { (target as Record<string, unknown>)[key] = original; });
  };
  // RegExp.prototype.test, String.prototype.match/replace with a regex all go through exec.
  wrap(RegExp.prototype, 'exec', 'regex');
  wrap(JSON, 'parse', 'jsonParse');
  wrap(Buffer.prototype, 'toString', 'bufferToString');
  wrap(Buffer, 'from', 'bufferFrom');
  wrap(Buffer, 'concat', 'bufferConcat');
  wrap(Buffer, 'alloc', 'bufferAlloc');
  wrap(Buffer, 'allocUnsafe', 'bufferAlloc');
  wrap(performance, 'now', 'clock');
  try {
    f();
  } finally {
    for (const r of restore.reverse()) r();
  }
  return n;
}

/** What one stream's chunks cost beyond a fixed amount per stream: at most `perChunk` × chunks + `perStream`. */
function assertBounded(n: Record<Counted, number>, bounds: Partial<Record<Counted, { perChunk: number; perStream: number }>>) {
  for (const [k, v] of Object.entries(n) as [Counted, number][]) {
    const b = bounds[k] ?? { perChunk: 0, perStream: 0 };
    const max = b.perChunk * CHUNKS + b.perStream;
    assert.ok(v <= max, `${k}: ${v} calls for ${CHUNKS} chunks, at most ${max} (${b.perChunk} per chunk + ${b.perStream} per stream): ${JSON.stringify(n)}`);
  }
}

describe('per-chunk work on the request path (counted, not timed)', () => {
  it('the tap: one latin1 decode per chunk, no regex after the first token, no JSON.parse, no copy', () => {
    const tap = createTap(true);
    assert.equal(tap.scan(FIRST), true, 'the first token is in the first chunk');
    const n = counting(() => {
      for (let i = 0; i < CHUNKS / 2; i++) {
        assert.equal(tap.scan(CHUNK), false);
        tap.scan(i % 2 === 0 ? HALF_A : HALF_B);
      }
      tap.scan(END);
      tap.end();
    });
    assert.equal(tap.done, true);
    assert.deepEqual(tap.usage, { promptTokens: 12, completionTokens: 10001, cachedTokens: 8 });
    // The usage is read once, from the last event: a handful of regex calls per stream.
    assertBounded(n, { bufferToString: { perChunk: 1, perStream: 1 }, regex: { perChunk: 0, perStream: 8 } });
  });

  it('an attempt relaying a stream: one write per chunk and nothing else per chunk beyond the tap', () => {
    const writes: number[] = [];
    const res = Object.assign(new EventEmitter(), {
      writeHead() { return res; },
      write(b: Buffer) { writes.push(b.length); return true; },
      end() {},
      destroy() {},
    });
    const clock = startClock();
    let ended = '';
    const owner = { res, ended: false, upstream() {}, stall() {}, prefilled() {} };
    const host = {
      ex: { owner, clock, identity: { kind: 'chat' }, draining: () => false, streamed: true, resumable: undefined },
      deps: { config: { headers: { route: true, serverTiming: true }, timeouts: { headersMs: 1000, unstreamedHeadersMs: 1000, idleMs: 1000, clientStallMs: 1000 } }, health: { observe() {} } },
      out: { sse: false, status: 0, reason: 'pinned' },
      tap: null,
      resumeLog: null,
      routeHeaders: () => ['x-warmroute-route', 'pinned'],
      answered() {},
      attemptEnded(_a: unknown, r: { kind: string }) { ended = r.kind; },
    } as unknown as AttemptHost;
    (host as { relay: ClientRelay }).relay = new ClientRelay(res as never, owner as never, 1000, () => {});
    const attempt = new AnswerAttempt(host, { name: 'a', origin: 'http://127.0.0.1:1' } as never, 0, true);
    const controller = { pause() { throw new Error('not paused: the client reads') }, resume() {}, abort() {} } as unknown as Dispatcher.DispatchController;
    attempt.onResponseStart(controller, 200, { 'content-type': 'text/event-stream' });
    attempt.onResponseData(controller, FIRST);
    assert.ok(clock.firstToken > 0, 'the first token is marked');
    const n = counting(() => {
      for (let i = 0; i < CHUNKS; i++) attempt.onResponseData(controller, CHUNK);
      attempt.onResponseData(controller, END);
      attempt.onResponseEnd();
    });
    assert.equal(ended, 'complete');
    assert.equal(writes.length, CHUNKS + 2, 'every chunk written once, as received');
    assert.ok(writes.slice(1).every((len, i) => len === (i < CHUNKS ? CHUNK.length : END.length)), 'written as received: no copies joined or split');
    // No clock read per chunk (only the first token and the end are timed, by the exchange).
    assertBounded(n, { bufferToString: { perChunk: 1, perStream: 1 }, regex: { perChunk: 0, perStream: 8 }, clock: { perChunk: 0, perStream: 2 } });
  });
});
