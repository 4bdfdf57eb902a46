import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { withModel } from '../../src/edge/body-model.js';

const splice = (text: string, model: string) => withModel(Buffer.from(text), model)?.toString('utf8') ?? null;

describe('the body’s model replaced in its bytes', () => {
  it('replaces the top-level model string and keeps every other byte', () => {
    const text = '{ "messages": [{"role":"user","content":"the \\"model\\": \\"x\\""}],\n  "model" :  "agent", "metadata": {"model": "inner"}}';
    assert.equal(splice(text, 'agent-v4'), '{ "messages": [{"role":"user","content":"the \\"model\\": \\"x\\""}],\n  "model" :  "agent-v4", "metadata": {"model": "inner"}}');
  });

  it('replaces every repeated top-level model key, so the parsed body and the bytes agree', () => {
    assert.equal(splice('{"model":"a","model":"b"}', 'v'), '{"model":"v","model":"v"}');
  });

  it('encodes the new name as a JSON string', () => {
    assert.deepEqual(JSON.parse(splice('{"model":"a"}', 'we"ird\\name')!), { model: 'we"ird\\name' });
  });

  it('is null when there is no plainly spelled top-level model string (the caller re-encodes)', () => {
    assert.equal(splice('{"messages":[{"model":"a"}]}', 'v'), null);
    assert.equal(splice('{"model":null}', 'v'), null);
    assert.equal(splice('{"mod\\u0065l":"a"}', 'v'), null);
  });

  it('for any body, parses as the original with the new model', () => {
    fc.assert(fc.property(fc.dictionary(fc.string(), fc.jsonValue()), fc.string(), fc.string(), (rest, old, next) => {
      const body = { ...rest, model: old };
      const out = withModel(Buffer.from(JSON.stringify(body, null, Object.keys(rest).length % 2 === 0 ? 0 : 2)), next);
      assert.ok(out !== null);
      assert.deepEqual(JSON.parse(out.toString('utf8')), JSON.parse(JSON.stringify({ ...body, model: next })));
    }), { numRuns: 300 });
  });
});
