import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { createResumeLog } from '../../src/stream/resume.js';

const event = (content: string, eol: string) => `data: {"id":"chatcmpl-1","choices":[{"delta":{"content":"${content}"}}]}${eol}${eol}`;

/** Feeds `text` cut at `cuts`; returns what the client was given during the stream and at its end. */
function relay(text: string, cuts: number[], maxBytes = 1 << 20) {
  const log = createResumeLog(maxBytes);
  const bytes = Buffer.from(text);
  const at = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
  const during: Buffer[] = [];
  let from = 0;
  for (const c of [...at, bytes.length]) {
    if (c > from) during.push(log.accept(bytes.subarray(from, c)));
    from = c;
  }
  const rest = log.rest();
  return { during: Buffer.concat(during).toString(), rest: rest?.toString() ?? '', partial: log.partial() };
}

describe('mid-stream resume log', () => {
  for (const [name, eol] of [['LF', '\n'], ['CRLF', '\r\n'], ['CR', '\r']] as const) {
    it(`${name} line ends: events reach the client as they end, nothing is lost, the partial answer is read`, () => {
      const text = event('Hel', eol) + event('lo', eol) + `data: [DONE]${eol}${eol}`;
      fc.assert(fc.property(fc.array(fc.nat(), { maxLength: 8 }), (cuts) => {
        const r = relay(text, cuts);
        assert.equal(r.during + r.rest, text, 'every byte, in order');
        // Only a bare CR at the very end can be the first half of a CRLF: that one waits for the end.
        assert.equal(r.rest, eol === '\r' ? `data: [DONE]${eol}${eol}` : '');
        assert.deepEqual(r.partial, { id: 'chatcmpl-1', text: 'Hello' });
      }), { numRuns: 200 });
    });
  }

  it('an unterminated last event is held back, then given at the end of the body', () => {
    const text = `${event('Hi', '\r\n')}data: {"id":"chatcmpl-1"}`;
    const r = relay(text, [10, 40]);
    assert.equal(r.during + r.rest, text);
    assert.equal(r.rest, 'data: {"id":"chatcmpl-1"}');
  });

  it('an event that never ends is not held past the bound: relayed, and no longer resumable', () => {
    const text = `data: ${'x'.repeat(300)}`;
    const r = relay(text, [50, 100, 150, 200, 250], 128);
    assert.equal(r.during + r.rest, text);
    assert.ok(r.during.length >= text.length - 128, 'at most the bound held back');
    assert.equal(r.partial, 'too_long');
  });
});
