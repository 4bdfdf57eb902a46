import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { AdapterGone, failureOf, RetryStatus } from '../../src/upstream/failures.js';

describe('upstream failure causes', () => {
  const err = (code: string) => Object.assign(new Error(code), { code });
  const table: [Error, { cause: string; retry: boolean; down: boolean }][] = [
    [err('ECONNREFUSED'), { cause: 'connect', retry: true, down: true }],
    [err('UND_ERR_CONNECT_TIMEOUT'), { cause: 'connect_timeout', retry: true, down: true }],
    [err('ECONNRESET'), { cause: 'reset', retry: true, down: false }],
    [err('UND_ERR_SOCKET'), { cause: 'reset', retry: true, down: false }],
    [new RetryStatus(503), { cause: 'status_503', retry: true, down: false }],
    [new AdapterGone('r1', 'a'), { cause: 'adapter_gone', retry: true, down: false }],
    [err('UND_ERR_HEADERS_TIMEOUT'), { cause: 'headers_timeout', retry: false, down: false }],
    [err('UND_ERR_BODY_TIMEOUT'), { cause: 'idle_timeout', retry: false, down: false }],
    [Object.assign(new Error('Response does not match the HTTP/1.1 protocol'), { name: 'HTTPParserError' }), { cause: 'malformed_response', retry: true, down: false }],
    [err('UND_ERR_RES_CONTENT_LENGTH_MISMATCH'), { cause: 'malformed_response', retry: true, down: false }],
    [new Error('weird'), { cause: 'other', retry: false, down: false }],
  ];
  for (const [e, want] of table) it(`${(e as { code?: string }).code ?? e.message} → ${want.cause}`, () => assert.deepEqual(failureOf(e), want));
});
