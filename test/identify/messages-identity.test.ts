import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isWarmrouteError } from '../../src/errors.js';
import { DEFAULT_IDENTITY_OPTIONS, identify, validateBody, type IdentityOptions } from '../../src/identify/identity.js';

const MODEL = 'google/gemma-4-31B-it';
const SYSTEM = 'You are a concise voice assistant for the city clinic. Answer in one short sentence.';
const TOOLS = [{ name: 'book', description: 'Book a slot', input_schema: { type: 'object', properties: { day: { type: 'string' } } } }];

type Body = Record<string, unknown>;
const id = (body: Body, headers: Record<string, string> = {}, opts: IdentityOptions = DEFAULT_IDENTITY_OPTIONS) => identify('messages', body, headers, opts);

/** A three-turn Anthropic conversation: user, assistant (text + tool_use), user (tool_result), assistant, user. */
function conversation(): Body[] {
  return [
    { role: 'user', content: 'I need an appointment.' },
    { role: 'assistant', content: [{ type: 'text', text: 'Let me look.' }, { type: 'tool_use', id: 'toolu_1', name: 'book', input: { day: 'monday' } }] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'monday 9am free' }] },
    { role: 'assistant', content: 'Monday at 9 works.' },
    { role: 'user', content: 'Book it please.' },
  ];
}

const base = (): Body => ({ model: MODEL, max_tokens: 256, system: SYSTEM, tools: TOOLS, messages: conversation() });

describe('identity: Anthropic Messages prefix chain', () => {
  it('cache_control on system blocks, tools and content blocks, and metadata, change no link', () => {
    const plain = id(base());
    const marked = id({
      ...base(),
      system: [{ type: 'text', text: SYSTEM, cache_control: { type: 'ephemeral' } }],
      tools: TOOLS.map((t) => ({ ...t, cache_control: { type: 'ephemeral', ttl: '1h' } })),
      metadata: { user_id: 'user-42' },
      messages: conversation().map((m, i) => (i === 4 ? { role: 'user', content: [{ type: 'text', text: 'Book it please.', cache_control: { type: 'ephemeral' } }] } : m)),
      temperature: 0.2,
      tool_choice: { type: 'auto' },
    });
    assert.deepEqual(marked.chain, plain.chain);
    assert.equal(marked.seed, plain.seed);
    assert.equal(marked.placementKey, plain.placementKey);
  });

  it('a string and the same text as blocks hash the same, system and messages alike; Claude Code\'s billing header is dropped', () => {
    const blocks = id({
      ...base(),
      system: [{ type: 'text', text: 'x-anthropic-billing-header: cc_version=1; cch=9f8e7d;' }, { type: 'text', text: SYSTEM.slice(0, 20) }, { type: 'text', text: SYSTEM.slice(20) }],
      messages: conversation().map((m) => (typeof m.content === 'string' ? { ...m, content: [{ type: 'text', text: m.content }] } : m)),
    });
    assert.deepEqual(blocks.chain, id(base()).chain);
  });

  it('what reaches the prompt does change the hash: a word of the system prompt, a tool, a message, the model', () => {
    const a = id(base());
    assert.notEqual(id({ ...base(), system: SYSTEM.replace('short', 'shorT') }).chain[0], a.chain[0]);
    assert.notEqual(id({ ...base(), tools: [{ ...TOOLS[0], description: 'Book a visit' }] }).chain[0], a.chain[0]);
    assert.notEqual(id({ ...base(), model: 'other' }).chain[0], a.chain[0]);
    const changed = conversation();
    changed[2] = { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'monday 10am free' }] };
    const b = id({ ...base(), messages: changed });
    assert.deepEqual(b.chain.slice(0, 2), a.chain.slice(0, 2));
    assert.notEqual(b.chain[2], a.chain[2]);
  });

  it("turn n's chain extends turn n−1's, and a user message of tool results only is not the caller speaking", () => {
    const full = id(base());
    const earlier = id({ ...base(), messages: conversation().slice(0, 3) });
    assert.deepEqual(full.chain.slice(0, 3), earlier.chain);
    assert.equal(full.firstUser, 0);
    assert.equal(full.lastUser, 4);
    // Three messages in, the last user message holds only a tool result: the caller's utterance is still the first.
    assert.equal(earlier.lastUser, 0);
    assert.equal(earlier.utterance, id({ ...base(), messages: conversation().slice(0, 1) }).utterance);
    assert.ok(full.sharedTokens > 0 && full.sharedTokens < full.promptTokens);
  });

  it('metadata.user_id is a session key only when its source is turned on', () => {
    const body = { ...base(), metadata: { user_id: 'user-42' } };
    assert.equal(id(body).sessionKey, null, 'off by default');
    const on: IdentityOptions = {
      ...DEFAULT_IDENTITY_OPTIONS,
      sessionKeySources: DEFAULT_IDENTITY_OPTIONS.sessionKeySources.map((s) => (typeof s === 'object' && s.name === 'metadata.user_id' ? { ...s, enabled: true } : s)),
    };
    const keyed = id(body, {}, on);
    assert.equal(keyed.sessionKey, 'user-42');
    assert.equal(keyed.sessionKeySource, 'body:metadata.user_id');
    assert.equal(id(body, { 'x-session-id': 'call-7' }, on).sessionKey, 'call-7', 'an earlier source still wins');
    assert.equal(id({ ...base(), metadata: 'user-42' }, {}, on).sessionKey, null, 'not an object: no key');
  });

  it('refuses what routing cannot read, naming the parameter', () => {
    const refused = (body: Body, param: string) => {
      assert.throws(() => validateBody('messages', body, DEFAULT_IDENTITY_OPTIONS), (e: unknown) => isWarmrouteError(e) && e.statusCode === 400 && e.param === param);
    };
    refused({ model: MODEL, messages: 'hi' }, 'messages');
    refused({ model: MODEL, messages: [] }, 'messages');
    refused({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], system: 7 }, 'system');
    refused({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], tools: {} }, 'tools');
    validateBody('messages', base(), DEFAULT_IDENTITY_OPTIONS);
  });
});
