// vLLM's error bodies: {"error": {"message", "type", "param", "code"}} with the numeric status as
// code. Request-validation failures (bad JSON, missing fields, wrong content type) come from
// FastAPI's RequestValidationError handler with type "Bad Request"; checks made while serving
// (context length, max_tokens) use "BadRequestError"; an unknown model is a 404 NotFoundError; an
// unknown stored response (Responses API) a 404 "invalid_request_error" naming the id.

export interface HttpError {
  status: number;
  body: string;
}

export function errorJson(message: string, type: string, code: number, param: string | null = null): string {
  return JSON.stringify({ error: { message, type, param, code } });
}

const err = (status: number, message: string, type: string, param: string | null = null): HttpError => ({
  status,
  body: errorJson(message, type, status, param),
});

/** Python's repr of a value as pydantic prints it in a validation error. */
function pyRepr(v: unknown): string {
  if (typeof v === 'string') return v.includes("'") && !v.includes('"') ? `"${v}"` : `'${v}'`;
  if (v === null || v === undefined) return 'None';
  if (typeof v === 'boolean') return v ? 'True' : 'False';
  if (typeof v === 'number') return String(v);
  if (Array.isArray(v)) return `<list of ${v.length} items>`;
  return `<dict of ${Object.keys(v as object).length} items>`;
}

// vLLM 0.32: one line per error, the location dotted ("body.messages"), which is also `param`.
export function validationError(kind: string, loc: (string | number)[], msg: string, input: unknown = {}): HttpError {
  const where = loc.join('.');
  const detail = `{'type': '${kind}', 'loc': '${where}', 'msg': ${pyRepr(msg)}, 'input': ${pyRepr(input)}}`;
  return err(400, `1 validation error:\n  ${detail}`, 'Bad Request', where);
}

export const errors = {
  /** The loc is the character offset where parsing failed (Python's and V8's agree on it). */
  invalidJson: (reason: string, position: number) =>
    err(400, `1 validation error:\n  {'type': 'json_invalid', 'loc': 'body.${position}', 'msg': 'JSON decode error', 'input': '<dict of 0 items>', 'ctx': {'error': ${pyRepr(reason)}}}`, 'Bad Request', `body.${position}`),
  missing: (field: string) => validationError('missing', ['body', field], 'Field required'),
  invalid: (field: string, msg: string, kind = 'value_error', input: unknown = {}) => validationError(kind, ['body', field], msg, input),
  unsupportedMediaType: () => err(400, "1 validation error:\n  Unsupported Media Type: Only 'application/json' is allowed", 'Bad Request'),
  unknownModel: (model: string, served: string) => err(404, `The model \`${model}\` does not exist. Valid aliases: ${served}.`, 'NotFoundError', 'model'),
  // vLLM tokenizes with truncation at max_model_len + 1, so it only knows "at least" that many.
  contextTooLong: (maxModelLen: number) =>
    err(
      400,
      `This model's maximum context length is ${maxModelLen} tokens. However, your prompt contains at least ` +
        `${maxModelLen + 1} input tokens, which exceeds this limit even without any output tokens. Please reduce ` +
        `the length of the input prompt. (parameter=input_tokens, value=${maxModelLen + 1})`,
      'BadRequestError',
      'input_tokens',
    ),
  maxTokensTooLarge: (maxTokens: number, maxModelLen: number, tokens: number) =>
    err(
      400,
      `'max_tokens' or 'max_completion_tokens' is too large: ${maxTokens}. This model's maximum context length ` +
        `is ${maxModelLen} tokens and your request has ${tokens} input tokens (${maxTokens} > ${maxModelLen} - ` +
        `${tokens}). (parameter=max_tokens, value=${maxTokens})`,
      'BadRequestError',
      'max_tokens',
    ),
  badRequest: (message: string, param: string | null = null) => err(400, message, 'BadRequestError', param),
  /** serving_responses.py _make_not_found_error: the id is not in this replica's response store. */
  responseNotFound: (id: string) => err(404, `Response with id '${id}' not found.`, 'invalid_request_error', 'response_id'),
  cannotCancel: () => err(400, 'Cannot cancel a synchronous response.', 'invalid_request_error'),
  busy: (waiting: number) =>
    err(503, `The server is busy: ${waiting} requests are waiting. Please retry later.`, 'ServiceUnavailableError'),
  notFound: () => ({ status: 404, body: JSON.stringify({ detail: 'Not Found' }) }),
  methodNotAllowed: () => ({ status: 405, body: JSON.stringify({ detail: 'Method Not Allowed' }) }),
};
