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

export function validationError(kind: string, loc: (string | number)[], msg: string, input: unknown = {}): HttpError {
  const locStr = `(${loc.map((l) => (typeof l === 'string' ? `'${l}'` : String(l))).join(', ')})`;
  // Python's repr of a str: double quotes when it holds a single quote ("Input should be 'user', ...").
  const msgRepr = msg.includes("'") && !msg.includes('"') ? `"${msg}"` : `'${msg}'`;
  const detail = `[{'type': '${kind}', 'loc': ${locStr}, 'msg': ${msgRepr}, 'input': ${JSON.stringify(input)}}]`;
  return err(400, `1 validation error:\n  ${detail} ${detail}`, 'Bad Request');
}

export const errors = {
  invalidJson: (reason: string) => validationError('json_invalid', ['body', 0], 'JSON decode error', reason),
  missing: (field: string) => validationError('missing', ['body', field], 'Field required'),
  invalid: (field: string, msg: string) => validationError('value_error', ['body', field], msg),
  unsupportedMediaType: () =>
    validationError('value_error', ['header', 'content-type'], "Unsupported Media Type: Only 'application/json' is allowed"),
  unknownModel: (model: string) => err(404, `The model \`${model}\` does not exist.`, 'NotFoundError', 'model'),
  contextTooLong: (maxModelLen: number, tokens: number) =>
    err(
      400,
      `This model's maximum context length is ${maxModelLen} tokens. However, your request has ${tokens} input ` +
        `tokens. Please reduce the length of the input messages. (parameter=input_tokens, value=${tokens})`,
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
