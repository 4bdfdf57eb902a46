import type { ServerResponse } from 'node:http';
import createError, { type FastifyErrorConstructor } from '@fastify/error';

/** OpenAI's error `type` values the gateway uses. */
export type OpenAIErrorType = 'invalid_request_error' | 'not_found_error' | 'server_error' | 'rate_limit_error';

export interface WarmrouteError extends Error {
  code: string;
  statusCode: number;
  /** OpenAI-facing fields; `code` there is short and stable (e.g. `model_not_found`). */
  openaiType: OpenAIErrorType;
  openaiCode: string;
  param: string | null;
  /** The message quotes text the client sent (a model name, a path): answered, never logged. */
  quotesClient: boolean;
  /** Extra response headers (Allow, Retry-After). */
  headers: readonly string[];
}

interface Spec { status: number; type: OpenAIErrorType; code: string; message: string; quotesClient?: boolean }

function define(name: string, spec: Spec) {
  const Base = createError(`WR_ERR_${name}`, spec.message, spec.status) as FastifyErrorConstructor;
  return (args: unknown[] = [], param: string | null = null, cause?: unknown, headers: readonly string[] = []): WarmrouteError => {
    const err = (cause === undefined ? new Base(...args) : new Base(...args, { cause })) as unknown as WarmrouteError;
    err.openaiType = spec.type;
    err.openaiCode = spec.code;
    err.param = param;
    err.quotesClient = spec.quotesClient ?? false;
    err.headers = headers;
    return err;
  };
}

/** Every error the gateway returns to a client. */
export const errors = {
  invalidJson: define('INVALID_JSON', { status: 400, type: 'invalid_request_error', code: 'invalid_json', message: 'The request body is not valid JSON%s' }),
  invalidRequest: define('INVALID_REQUEST', { status: 400, type: 'invalid_request_error', code: 'invalid_request', message: '%s' }),
  nestingTooDeep: define('NESTING_TOO_DEEP', { status: 400, type: 'invalid_request_error', code: 'nesting_too_deep', message: 'The request body nests arrays and objects more than %d levels deep (limits.jsonDepth)' }),
  sessionKeyTooLong: define('SESSION_KEY_TOO_LONG', { status: 400, type: 'invalid_request_error', code: 'session_key_too_long', message: 'The session key from %s is %d bytes; the limit is %d bytes' }),
  expectationFailed: define('EXPECTATION_FAILED', { status: 417, type: 'invalid_request_error', code: 'expectation_failed', message: 'Only Expect: 100-continue is supported' }),
  headersTooLarge: define('HEADERS_TOO_LARGE', { status: 431, type: 'invalid_request_error', code: 'headers_too_large', message: 'The request headers are larger than the server accepts' }),
  bodyTooLarge: define('BODY_TOO_LARGE', { status: 413, type: 'invalid_request_error', code: 'request_too_large', message: 'The request body exceeds the %d-byte limit' }),
  unsupportedMediaType: define('UNSUPPORTED_MEDIA_TYPE', { status: 415, type: 'invalid_request_error', code: 'unsupported_media_type', message: 'Unsupported content type %s: send application/json', quotesClient: true }),
  notFound: define('NOT_FOUND', { status: 404, type: 'not_found_error', code: 'not_found', message: 'No route for %s %s', quotesClient: true }),
  methodNotAllowed: define('METHOD_NOT_ALLOWED', { status: 405, type: 'invalid_request_error', code: 'method_not_allowed', message: '%s is not allowed here; use %s' }),
  modelNotFound: define('MODEL_NOT_FOUND', { status: 404, type: 'invalid_request_error', code: 'model_not_found', message: 'The model `%s` does not exist or no healthy replica serves it', quotesClient: true }),
  invalidApiKey: define('INVALID_API_KEY', { status: 401, type: 'invalid_request_error', code: 'invalid_api_key', message: '%s' }),
  keyLimit: define('KEY_LIMIT', { status: 429, type: 'rate_limit_error', code: 'rate_limit_exceeded', message: 'API key %s already has %d requests in flight, its limit' }),
  tooManyMessages: define('TOO_MANY_MESSAGES', { status: 400, type: 'invalid_request_error', code: 'too_many_messages', message: 'The request has %d messages; the limit is %d (limits.maxMessages)' }),
  overloaded: define('OVERLOADED', { status: 503, type: 'server_error', code: 'overloaded', message: 'The gateway is at its limit: %s' }),
  noReplica: define('NO_REPLICA', { status: 503, type: 'server_error', code: 'no_healthy_replica', message: 'No healthy replica is available' }),
  queueTimeout: define('QUEUE_TIMEOUT', { status: 503, type: 'server_error', code: 'queue_timeout', message: 'Timed out after %d ms waiting for a free slot (%s)' }),
  deadlinePassed: define('DEADLINE_PASSED', { status: 503, type: 'server_error', code: 'deadline_exceeded', message: 'The request\'s time-to-first-token deadline (%d ms) passed while it waited for a slot (%s): answered now rather than late' }),
  shedForInteractive: define('SHED_FOR_INTERACTIVE', { status: 503, type: 'server_error', code: 'overloaded', message: 'A batch request was shed to make room for an interactive one (%s)' }),
  upstreamUnavailable: define('UPSTREAM_UNAVAILABLE', { status: 502, type: 'server_error', code: 'upstream_unavailable', message: 'Replica %s failed before responding: %s' }),
  upstreamTimeout: define('UPSTREAM_TIMEOUT', { status: 504, type: 'server_error', code: 'upstream_timeout', message: 'Replica %s did not respond within %d ms' }),
  upstreamStream: define('UPSTREAM_STREAM', { status: 502, type: 'server_error', code: 'upstream_stream_error', message: 'Replica %s failed mid-stream: %s' }),
  adapterLoadFailed: define('ADAPTER_LOAD_FAILED', { status: 502, type: 'server_error', code: 'adapter_load_failed', message: 'Replica %s could not load adapter `%s`: %s' }),
  adapterUnavailable: define('ADAPTER_UNAVAILABLE', { status: 503, type: 'server_error', code: 'adapter_unavailable', message: 'No replica can load adapter `%s`: %s' }),
  responseStateLost: define('RESPONSE_STATE_LOST', { status: 409, type: 'invalid_request_error', code: 'response_state_lost', message: 'The stored response this request continues was held by replica %s, which %s: vLLM keeps stored responses in the memory of the replica that produced them, so no other replica can continue it. Start a new conversation, or resend the history with store: false' }),
  clientStalled: define('CLIENT_STALLED', { status: 408, type: 'invalid_request_error', code: 'client_stalled', message: 'The client read nothing of its response for %d ms (timeouts.clientStallMs)' }),
  shuttingDown: define('SHUTTING_DOWN', { status: 503, type: 'server_error', code: 'shutting_down', message: 'The gateway is shutting down' }),
  // The admin port's own.
  adminTokenRequired: define('ADMIN_TOKEN_REQUIRED', { status: 401, type: 'invalid_request_error', code: 'invalid_admin_token', message: 'The admin API needs Authorization: Bearer <admin token>' }),
  adminLoopbackOnly: define('ADMIN_LOOPBACK_ONLY', { status: 403, type: 'invalid_request_error', code: 'admin_loopback_only', message: 'Without an admin token the admin API answers loopback clients only: set admin.token (or WARMROUTE_ADMIN_TOKEN; the Helm chart makes one) and send Authorization: Bearer <token>' }),
  adminChangeNeedsToken: define('ADMIN_CHANGE_NEEDS_TOKEN', { status: 403, type: 'invalid_request_error', code: 'admin_token_required', message: 'Without an admin token, admin changes (drain, undrain, unpin) are allowed only when the admin listener is bound to loopback (admin.host 127.0.0.1): set admin.token (or WARMROUTE_ADMIN_TOKEN; the Helm chart makes one) and send Authorization: Bearer <token>' }),
  replicaNotFound: define('REPLICA_NOT_FOUND', { status: 404, type: 'not_found_error', code: 'replica_not_found', message: 'No replica of that name' }),
  sessionNotFound: define('SESSION_NOT_FOUND', { status: 404, type: 'not_found_error', code: 'session_not_found', message: 'No pin for that session key' }),
  responseNotFound: define('RESPONSE_NOT_FOUND', { status: 404, type: 'not_found_error', code: 'response_not_found', message: 'No record of that response id' }),
  internal: define('INTERNAL', { status: 500, type: 'server_error', code: 'internal_error', message: 'Internal gateway error' }),
} as const;

export function isWarmrouteError(e: unknown): e is WarmrouteError {
  return e instanceof Error && typeof (e as WarmrouteError).openaiCode === 'string';
}

/**
 * The API shape a caller's errors are written in: OpenAI's (`{"error":{message,type,param,code}}`)
 * or Anthropic's (`{"type":"error","error":{type,message}}`, for the Messages API). Both render the
 * same registry entry: one status, one message, one code for the logs.
 */
export type ErrorShape = 'openai' | 'anthropic';

/** Anthropic's error type by status, as its SDKs map them (a status the table lacks is the client's fault below 500). */
const ANTHROPIC_TYPE: Readonly<Record<number, string>> = {
  400: 'invalid_request_error', 401: 'authentication_error', 403: 'permission_error', 404: 'not_found_error',
  413: 'request_too_large', 429: 'rate_limit_error', 500: 'api_error', 502: 'api_error', 504: 'api_error', 529: 'overloaded_error',
};

/** Anthropic's `error.type` for a registry entry: a 503 is the gateway at its limit or out of replicas, Anthropic's overloaded_error. */
export function anthropicErrorType(err: WarmrouteError): string {
  const s = err.statusCode;
  if (s === 503) return 'overloaded_error';
  return ANTHROPIC_TYPE[s] ?? (s >= 500 ? 'api_error' : 'invalid_request_error');
}

/** Answers with the error, unless a response is already under way (then there is nothing to say). */
export function writeError(res: ServerResponse, err: WarmrouteError, extraHeaders: readonly string[] = [], shape: ErrorShape = 'openai'): void {
  if (res.headersSent) return;
  res.writeHead(err.statusCode, ['content-type', 'application/json', ...err.headers, ...extraHeaders]);
  res.end(errorBody(err, shape));
}

/** The body for an error, in the caller's API shape. */
export function errorBody(err: WarmrouteError, shape: ErrorShape = 'openai'): string {
  if (shape === 'anthropic') return JSON.stringify({ type: 'error', error: { type: anthropicErrorType(err), message: err.message } });
  return JSON.stringify({ error: { message: err.message, type: err.openaiType, param: err.param, code: err.openaiCode } });
}

/** Anything thrown inside a request that is not one of ours becomes a 500 with the same shape. */
export function toWarmrouteError(e: unknown): WarmrouteError {
  return isWarmrouteError(e) ? e : errors.internal([], null, e);
}
