import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { errorShapeOf } from '../../src/edge/routes.js';
import { errorBody, errors } from '../../src/errors.js';

describe('errors: one registry, rendered in the caller\'s API shape', () => {
  it('Anthropic\'s shape carries the type its SDKs map each status to, and the same message', () => {
    const expected: [keyof typeof errors, unknown[], number, string][] = [
      ['invalidRequest', ['bad'], 400, 'invalid_request_error'],
      ['invalidApiKey', ['no key'], 401, 'authentication_error'],
      ['adminLoopbackOnly', [], 403, 'permission_error'],
      ['notFound', ['POST', '/v1/x'], 404, 'not_found_error'],
      ['modelNotFound', ['m'], 404, 'not_found_error'],
      ['methodNotAllowed', ['GET', 'POST'], 405, 'invalid_request_error'],
      ['bodyTooLarge', [10], 413, 'request_too_large'],
      ['keyLimit', ['k', 2], 429, 'rate_limit_error'],
      ['internal', [], 500, 'api_error'],
      ['upstreamUnavailable', ['r', 'reset'], 502, 'api_error'],
      ['noReplica', [], 503, 'overloaded_error'],
      ['queueTimeout', [5, 'replica'], 503, 'overloaded_error'],
      ['upstreamTimeout', ['r', 5], 504, 'api_error'],
    ];
    for (const [name, args, status, type] of expected) {
      const err = (errors[name] as (a: unknown[]) => ReturnType<typeof errors.internal>)(args);
      assert.equal(err.statusCode, status, name);
      assert.equal(errorBody(err, 'anthropic'), JSON.stringify({ type: 'error', error: { type, message: err.message } }), name);
      const openai = JSON.parse(errorBody(err)) as { error: { message: string; code: string } };
      assert.equal(openai.error.message, err.message);
      assert.equal(openai.error.code, err.openaiCode);
    }
  });
});

describe('errors: the shape follows the path', () => {
  it('Anthropic\'s under /v1/messages (its routes, and the ones the gateway lacks), OpenAI\'s elsewhere', () => {
    assert.equal(errorShapeOf('/v1/messages'), 'anthropic');
    assert.equal(errorShapeOf('/v1/messages/count_tokens'), 'anthropic');
    assert.equal(errorShapeOf('/v1/messages/batches'), 'anthropic');
    assert.equal(errorShapeOf('/v1/messagesx'), 'openai');
    assert.equal(errorShapeOf('/v1/chat/completions'), 'openai');
  });
});
