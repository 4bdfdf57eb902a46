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
}

interface Spec { status: number; type: OpenAIErrorType; code: string; message: string }

function define(name: string, spec: Spec) {
  const Base = createError(`WR_ERR_${name}`, spec.message, spec.status) as FastifyErrorConstructor;
  return (args: unknown[] = [], param: string | null = null, cause?: unknown): WarmrouteError => {
    const err = (cause === undefined ? new Base(...args) : new Base(...args, { cause })) as unknown as WarmrouteError;
    err.openaiType = spec.type;
    err.openaiCode = spec.code;
    err.param = param;
    return err;
  };
}

/** Every error the gateway returns to a client. */
export const errors = {
  invalidJson: define('INVALID_JSON', { status: 400, type: 'invalid_request_error', code: 'invalid_json', message: 'The request body is not valid JSON: %s' }),
  invalidRequest: define('INVALID_REQUEST', { status: 400, type: 'invalid_request_error', code: 'invalid_request', message: '%s' }),
  sessionKeyTooLong: define('SESSION_KEY_TOO_LONG', { status: 400, type: 'invalid_request_error', code: 'session_key_too_long', message: 'The session key from %s is %d bytes; the limit is %d bytes' }),
  bodyTooLarge: define('BODY_TOO_LARGE', { status: 413, type: 'invalid_request_error', code: 'request_too_large', message: 'The request body exceeds the %d-byte limit' }),
  unsupportedMediaType: define('UNSUPPORTED_MEDIA_TYPE', { status: 415, type: 'invalid_request_error', code: 'unsupported_media_type', message: 'Unsupported content type %s: send application/json' }),
  notFound: define('NOT_FOUND', { status: 404, type: 'not_found_error', code: 'not_found', message: 'No route for %s %s' }),
  modelNotFound: define('MODEL_NOT_FOUND', { status: 404, type: 'invalid_request_error', code: 'model_not_found', message: 'The model `%s` does not exist or no healthy replica serves it' }),
  noReplica: define('NO_REPLICA', { status: 503, type: 'server_error', code: 'no_healthy_replica', message: 'No healthy replica is available' }),
  queueTimeout: define('QUEUE_TIMEOUT', { status: 503, type: 'server_error', code: 'queue_timeout', message: 'Timed out after %d ms waiting for a free slot on replica %s' }),
  upstreamUnavailable: define('UPSTREAM_UNAVAILABLE', { status: 502, type: 'server_error', code: 'upstream_unavailable', message: 'Replica %s failed before responding: %s' }),
  upstreamTimeout: define('UPSTREAM_TIMEOUT', { status: 504, type: 'server_error', code: 'upstream_timeout', message: 'Replica %s did not respond within %d ms' }),
  upstreamStream: define('UPSTREAM_STREAM', { status: 502, type: 'server_error', code: 'upstream_stream_error', message: 'Replica %s failed mid-stream: %s' }),
  shuttingDown: define('SHUTTING_DOWN', { status: 503, type: 'server_error', code: 'shutting_down', message: 'The gateway is shutting down' }),
  internal: define('INTERNAL', { status: 500, type: 'server_error', code: 'internal_error', message: 'Internal gateway error' }),
} as const;

export function isWarmrouteError(e: unknown): e is WarmrouteError {
  return e instanceof Error && typeof (e as WarmrouteError).openaiCode === 'string';
}

/** Answers with the error, unless a response is already under way (then there is nothing to say). */
export function writeError(res: ServerResponse, err: WarmrouteError, extraHeaders: readonly string[] = []): void {
  if (res.headersSent) return;
  res.writeHead(err.statusCode, ['content-type', 'application/json', ...extraHeaders]);
  res.end(errorBody(err));
}

/** The OpenAI-shaped body for an error. */
export function errorBody(err: WarmrouteError): string {
  return JSON.stringify({ error: { message: err.message, type: err.openaiType, param: err.param, code: err.openaiCode } });
}

/**
 * Maps anything thrown inside a request (fastify's own errors included) to a WarmrouteError,
 * so that every error a client sees has the same shape.
 */
export function toWarmrouteError(e: unknown, bodyLimit: number): WarmrouteError {
  if (isWarmrouteError(e)) return e;
  const code = (e as { code?: string })?.code;
  switch (code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE': return errors.bodyTooLarge([bodyLimit]);
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE': return errors.unsupportedMediaType([(e as Error).message.replace(/^Unsupported Media Type:?\s*/, '')]);
    case 'FST_ERR_CTP_EMPTY_JSON_BODY': return errors.invalidJson(['the body is empty']);
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH': return errors.invalidRequest(['Request body size did not match Content-Length']);
  }
  const status = (e as { statusCode?: number })?.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) return errors.invalidRequest([(e as Error).message]);
  return errors.internal([], null, e);
}
