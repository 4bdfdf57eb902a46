import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isWarmrouteError } from '../../src/errors.js';
import { DEFAULT_IDENTITY_OPTIONS, identify, sessionKeyOf, validateBody, type IdentityOptions } from '../../src/identify/identity.js';
import { MESSAGE_OVERHEAD_TOKENS } from '../../src/identify/chain.js';
import { chatIdentity, conversation, prng } from '../routing/helpers.js';

const SYSTEM = 'You are a concise voice assistant for the city clinic. Answer in one short sentence.';

describe('identity: prefix chain (chat)', () => {
  it("turn n's chain starts with turn n−1's whole chain, for every turn", () => {
    const conv = conversation(SYSTEM, 8, prng(1));
    let prev = chatIdentity(conv.messages(1)).chain;
    for (let turn = 2; turn <= 8; turn++) {
      const chain = chatIdentity(conv.messages(turn)).chain;
      assert.equal(chain.length, prev.length + 2);
      assert.deepEqual(chain.slice(0, prev.length), prev);
      prev = chain;
    }
  });

  it('a one-byte change in the system prompt changes every link', () => {
    const conv = conversation(SYSTEM, 5, prng(2));
    const a = chatIdentity(conv.messages(5)).chain;
    const msgs = conv.messages(5) as { role: string; content: string }[];
    msgs[0] = { role: 'system', content: SYSTEM.replace('short', 'shorT') };
    const b = chatIdentity(msgs).chain;
    assert.equal(a.length, b.length);
    for (let i = 0; i < a.length; i++) assert.notEqual(a[i], b[i], `link ${i}`);
  });

  const seedCases: [string, Record<string, unknown>][] = [
    ['model', { model: 'other-model' }],
    ['cache_salt', { cache_salt: 'tenant-b' }],
    ['tools', { tools: [{ type: 'function', function: { name: 'book', parameters: {} } }] }],
    ['response_format', { response_format: { type: 'json_object' } }],
    ['chat_template_kwargs', { chat_template_kwargs: { enable_thinking: false } }],
    ['chat_template', { chat_template: '{{ messages }}' }],
  ];
  for (const [field, extra] of seedCases) {
    it(`${field} changes the seed, hence every link`, () => {
      const msgs = conversation(SYSTEM, 3, prng(3)).messages(3);
      const base = chatIdentity(msgs, null, { cache_salt: 'tenant-a' }).chain;
      const changed = chatIdentity(msgs, null, { cache_salt: 'tenant-a', ...extra }).chain;
      assert.ok(base.length > 0, 'a chain to compare');
      assert.equal(changed.length, base.length);
      for (let i = 0; i < base.length; i++) assert.notEqual(base[i], changed[i], `link ${i}`);
    });
  }

  it('sampling parameters and stream do not change the chain', () => {
    const msgs = conversation(SYSTEM, 3, prng(4)).messages(3);
    const a = chatIdentity(msgs).chain;
    const b = chatIdentity(msgs, null, { temperature: 0.2, max_tokens: 99, stream: true, stream_options: { include_usage: true } }).chain;
    assert.deepEqual(a, b);
  });

  const messageFields: [string, Record<string, unknown>][] = [
    ['role', { role: 'developer' }],
    ['name', { name: 'caller' }],
    ['content', { content: 'hello there' }],
    ['tool_calls', { tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] }],
    ['tool_call_id', { tool_call_id: 'c1' }],
  ];
  for (const [field, over] of messageFields) {
    it(`message field ${field} is part of its link and of every later one`, () => {
      const base = [{ role: 'system', content: SYSTEM }, { role: 'user', content: 'hello' }, { role: 'assistant', content: 'hi' }];
      const changed = base.map((m, i) => (i === 1 ? { ...m, ...over } : m));
      const a = chatIdentity(base).chain;
      const b = chatIdentity(changed).chain;
      assert.equal(a[0], b[0]);
      assert.notEqual(a[1], b[1]);
      assert.notEqual(a[2], b[2]);
    });
  }

  it('object key order inside content parts does not matter (a stable walk, not JSON.stringify)', () => {
    const a = chatIdentity([{ role: 'user', content: [{ type: 'text', text: 'hi' }] }]).chain;
    const b = chatIdentity([{ content: [{ text: 'hi', type: 'text' }], role: 'user' }]).chain;
    assert.deepEqual(a, b);
  });

  it('string framing cannot be forged: splitting text differently changes the link', () => {
    const a = chatIdentity([{ role: 'user', content: [{ type: 'text', text: 'ab' }, { type: 'text', text: 'c' }] }]).chain;
    const b = chatIdentity([{ role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'bc' }] }]).chain;
    assert.notDeepEqual(a, b);
  });

  it('estimates tokens at ~4 bytes each plus template overhead, cumulatively', () => {
    const text = 'x'.repeat(400);
    const id = chatIdentity([{ role: 'system', content: text }, { role: 'user', content: text }]);
    const per = Math.ceil((400 + 'system'.length) / 4) + MESSAGE_OVERHEAD_TOKENS;
    assert.equal(id.chainTokens[0], per);
    assert.equal(id.chainTokens[1], per + Math.ceil((400 + 'user'.length) / 4) + MESSAGE_OVERHEAD_TOKENS);
    assert.equal(id.promptTokens, id.chainTokens[1]);
  });

  it('an inline data: URL is hashed in full but counted as at most 1K tokens', () => {
    const image = (b64: string) => [{ role: 'user', content: [{ type: 'image_url', image_url: { url: `data:image/png;base64,${b64}` } }] }];
    const a = chatIdentity(image('A'.repeat(400_000)));
    assert.ok(a.promptTokens < 1100, `${a.promptTokens}`);
    assert.notEqual(chatIdentity(image('A'.repeat(399_999) + 'B')).chain[0], a.chain[0]);
  });

  it('placement key: system prompt + first user turn — stable across turns, distinct across conversations', () => {
    const a = conversation(SYSTEM, 4, prng(5));
    const b = conversation(SYSTEM, 4, prng(6));
    const a1 = chatIdentity(a.messages(1));
    assert.equal(a1.placementKey, a1.chain[1]);
    assert.equal(chatIdentity(a.messages(4)).placementKey, a1.placementKey);
    assert.notEqual(chatIdentity(b.messages(1)).placementKey, a1.placementKey);
    assert.equal(a1.sharedTokens, a1.chainTokens[0], 'the system prompt is the shared part');
  });
});

describe('identity: prefix chain (completions)', () => {
  const complete = (prompt: unknown) => identify('completion', { model: 'm', prompt }, {}, DEFAULT_IDENTITY_OPTIONS);

  it('cuts a string prompt into 64-byte links; extending the prompt keeps the earlier links', () => {
    const text = 'a quick brown fox jumps over the lazy dog; '.repeat(20); // 860 bytes
    const short = complete(text);
    assert.equal(short.chain.length, Math.ceil(text.length / 64));
    assert.deepEqual(short.chainTokens.slice(0, 2), [16, 32]);
    const long = complete(text + 'and then some more text');
    const full = Math.floor(text.length / 64);
    assert.deepEqual(long.chain.slice(0, full), short.chain.slice(0, full));
    assert.notEqual(long.chain[full], short.chain[full], 'the partial last block changed');
  });

  it('cuts a token-id prompt into 16-id links with exact token counts; a batch routes by its first prompt', () => {
    const ids = Array.from({ length: 40 }, (_, i) => i * 3);
    const id = complete(ids);
    assert.equal(id.chain.length, 3);
    assert.deepEqual(id.chainTokens, [16, 32, 40]);
    assert.deepEqual(complete([ids, [1, 2, 3]]).chain, id.chain);
    assert.notDeepEqual(complete(ids.map((x) => x + 1)).chain, id.chain);
  });

  it('text and token-id prompts never share links', () => {
    assert.notEqual(complete('0000').chain[0], complete([0x30303030]).chain[0]);
  });
});

describe('identity: session key', () => {
  const body = { model: 'm', messages: [], prompt_cache_key: 'pck', session_id: 'sid', user: 'u1' };
  const headers = { 'x-session-id': 'hsid', 'x-session-affinity': 'haff' };
  const table: [string, Record<string, string>, Record<string, unknown>, IdentityOptions, [string, string] | null][] = [
    ['x-session-id first', headers, body, DEFAULT_IDENTITY_OPTIONS, ['hsid', 'header:x-session-id']],
    ['then x-session-affinity', { 'x-session-affinity': 'haff' }, body, DEFAULT_IDENTITY_OPTIONS, ['haff', 'header:x-session-affinity']],
    ['then body prompt_cache_key', {}, body, DEFAULT_IDENTITY_OPTIONS, ['pck', 'body:prompt_cache_key']],
    ['then body session_id', {}, { ...body, prompt_cache_key: undefined }, DEFAULT_IDENTITY_OPTIONS, ['sid', 'body:session_id']],
    ['user is listed but off by default', {}, { model: 'm', user: 'u1' }, DEFAULT_IDENTITY_OPTIONS, null],
    ['user can be switched on', {}, { model: 'm', user: 'u1' },
      { ...DEFAULT_IDENTITY_OPTIONS, sessionKeySources: ['header:x-session-id', 'header:x-session-affinity', 'body:prompt_cache_key', 'body:session_id', 'body:user'] },
      ['u1', 'body:user']],
    ['custom order, string shorthand', headers, body, { ...DEFAULT_IDENTITY_OPTIONS, sessionKeySources: ['body:session_id', 'header:x-session-id'] }, ['sid', 'body:session_id']],
    ['numbers are keys too', {}, { model: 'm', session_id: 42 }, DEFAULT_IDENTITY_OPTIONS, ['42', 'body:session_id']],
    ['empty values are skipped', { 'x-session-id': '' }, { model: 'm', session_id: 'sid' }, DEFAULT_IDENTITY_OPTIONS, ['sid', 'body:session_id']],
  ];
  for (const [name, h, b, o, want] of table) {
    it(name, () => {
      const got = sessionKeyOf(b, h, o);
      assert.deepEqual(got === null ? null : [got.key, got.source], want);
    });
  }

  it('a key of exactly 256 bytes passes; 257 bytes is a 400 session_key_too_long (bytes, not chars)', () => {
    assert.equal(sessionKeyOf({}, { 'x-session-id': 'k'.repeat(256) }, DEFAULT_IDENTITY_OPTIONS)?.key.length, 256);
    for (const key of ['k'.repeat(257), 'é'.repeat(129)]) {
      assert.throws(() => identify('chat', { messages: [] }, { 'x-session-id': key }, DEFAULT_IDENTITY_OPTIONS), (e: unknown) => {
        assert.ok(isWarmrouteError(e));
        assert.equal(e.openaiCode, 'session_key_too_long');
        assert.equal(e.statusCode, 400);
        return true;
      });
    }
  });

  it('a too-long body key names its parameter', () => {
    assert.throws(() => sessionKeyOf({ prompt_cache_key: 'k'.repeat(300) }, {}, DEFAULT_IDENTITY_OPTIONS), (e: unknown) => {
      assert.ok(isWarmrouteError(e));
      assert.equal(e.param, 'prompt_cache_key');
      return true;
    });
  });
});

describe('identity: Responses API (/v1/responses)', () => {
  const O = DEFAULT_IDENTITY_OPTIONS;
  const INSTRUCTIONS = 'You are the clinic\'s voice agent. Keep answers short.';
  const resp = (input: unknown, extra: Record<string, unknown> = {}, headers: Record<string, string> = {}) =>
    identify('responses', { model: 'm', instructions: INSTRUCTIONS, input, ...extra }, headers, O);
  // What the SDK sends back: the output item of the previous response, id and status included.
  const answer = (text: string) => ({ id: `msg_${text.length}`, type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text, annotations: [] }] });

  it('a keyless store:false conversation that resends its history extends its own chain, from a string first turn', () => {
    const t1 = resp('I need an appointment.', { store: false });
    const history = [{ role: 'user', content: 'I need an appointment.' }, answer('When would suit you?'), { type: 'message', role: 'user', content: 'Tomorrow.' }];
    const t2 = resp(history, { store: false });
    assert.equal(t1.chain.length, 1);
    assert.equal(t2.chain.length, 3);
    assert.deepEqual(t2.chain.slice(0, 1), t1.chain);
    const t3 = resp([...history, answer('Nine or ten?'), { role: 'user', content: 'Nine.' }], { store: false });
    assert.deepEqual(t3.chain.slice(0, 3), t2.chain);
    assert.equal(t3.placementKey, t1.placementKey, 'the first user turn places the whole conversation');
    assert.ok(t3.sharedTokens > 0 && t3.sharedTokens < t3.promptTokens, 'instructions are the shared part');
    assert.equal(t3.storesResponse, false);
    assert.equal(t3.storedResponseId, null);
  });

  for (const [field, extra] of [['model', { model: 'other' }], ['instructions', { instructions: `${INSTRUCTIONS}!` }], ['tools', { tools: [{ type: 'function', name: 'book' }] }], ['cache_salt', { cache_salt: 'b' }], ['text format', { text: { format: { type: 'json_object' } } }]] as const) {
    it(`${field} changes the seed, hence every link`, () => {
      const a = resp([{ role: 'user', content: 'x' }, { role: 'user', content: 'y' }]).chain;
      const b = resp([{ role: 'user', content: 'x' }, { role: 'user', content: 'y' }], extra).chain;
      assert.ok(a.length > 0, 'a chain to compare');
      assert.equal(b.length, a.length);
      for (let i = 0; i < a.length; i++) assert.notEqual(a[i], b[i]);
    });
  }

  it('function calls and their outputs are links of their own; an item id does not change a link', () => {
    const call = { type: 'function_call', id: 'fc_1', call_id: 'call_1', name: 'book', arguments: '{"day":"mon"}', status: 'completed' };
    const out = { type: 'function_call_output', call_id: 'call_1', output: '{"ok":true}' };
    const a = resp([{ role: 'user', content: 'book it' }, call, out]);
    const b = resp([{ role: 'user', content: 'book it' }, { ...call, id: 'fc_other' }, out]);
    assert.deepEqual(a.chain, b.chain);
    const c = resp([{ role: 'user', content: 'book it' }, { ...call, arguments: '{"day":"tue"}' }, out]);
    assert.notEqual(a.chain[1], c.chain[1]);
  });

  it('previous_response_id: the stored response is what routes it, no chain (its prompt is on the replica); store defaults to true', () => {
    const id = resp('next please', { previous_response_id: 'resp_123' }, { 'x-session-id': 's1' });
    assert.equal(id.storedResponseId, 'resp_123');
    assert.deepEqual(id.chain, []);
    assert.equal(id.promptTokens, 0, 'no estimate: the cost model must not learn the token scale from it');
    assert.equal(id.placementKey, null);
    assert.equal(id.storesResponse, true);
    assert.equal(id.sessionKey, 's1');
    assert.equal(resp('x', { prompt_cache_key: 'pk' }).sessionKey, 'pk', 'prompt_cache_key is a session key here too');
    assert.equal(resp('x', { previous_response_id: '' }).storedResponseId, null);
  });

  it('fields routing reads are checked: input, store, previous_response_id (type and length)', () => {
    const bad: [Record<string, unknown>, string][] = [
      [{ input: 42 }, 'input'], [{ input: 'x', store: 'yes' }, 'store'], [{ input: 'x', previous_response_id: 7 }, 'previous_response_id'],
    ];
    for (const [body, param] of bad) {
      assert.throws(() => validateBody('responses', { model: 'm', ...body }, O), (e: unknown) => isWarmrouteError(e) && e.statusCode === 400 && e.param === param);
    }
    assert.throws(() => resp('x', { previous_response_id: `resp_${'a'.repeat(300)}` }), (e: unknown) => isWarmrouteError(e) && e.param === 'previous_response_id');
    validateBody('responses', { model: 'm', input: [], previous_response_id: null, store: null }, O);
  });
});
