import type { IncomingHttpHeaders } from 'node:http';
import { errors } from '../errors.js';
import type { RequestIdentity } from './types.js';

export interface IdentityOptions {
  /** Ordered sources of the session key: `header:<name>` or `body:<field>`. First present wins. */
  readonly sessionKeySources: readonly string[];
  readonly maxSessionKeyBytes: number;
}

export type RequestKind = RequestIdentity['kind'];

type Body = Record<string, unknown>;

/**
 * Checks the fields routing relies on, with OpenAI-style 400s naming the bad parameter.
 * Everything else is the replica's to judge: the gateway forwards the original bytes.
 */
export function validateBody(kind: RequestKind, body: unknown): asserts body is Body {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw errors.invalidRequest(['The request body must be a JSON object']);
  }
  const b = body as Body;
  if (b.model !== undefined && typeof b.model !== 'string') throw errors.invalidRequest(['`model` must be a string'], 'model');
  if (b.stream !== undefined && typeof b.stream !== 'boolean') throw errors.invalidRequest(['`stream` must be a boolean'], 'stream');
  if (kind === 'chat' && !Array.isArray(b.messages)) throw errors.invalidRequest(['`messages` must be an array'], 'messages');
  if (kind === 'completion' && typeof b.prompt !== 'string' && !Array.isArray(b.prompt)) {
    throw errors.invalidRequest(['`prompt` must be a string or an array'], 'prompt');
  }
}

/** The session key from the first configured source that has one; over-long keys are a 400. */
export function sessionKeyOf(
  body: Body | null,
  headers: IncomingHttpHeaders,
  opts: IdentityOptions,
): { key: string; source: string } | null {
  for (const source of opts.sessionKeySources) {
    const colon = source.indexOf(':');
    const where = source.slice(0, colon);
    const name = source.slice(colon + 1);
    let value: unknown;
    if (where === 'header') value = headers[name];
    else if (where === 'body' && body !== null) value = body[name];
    if (Array.isArray(value)) value = value[0];
    if (typeof value === 'number') value = String(value);
    if (typeof value !== 'string' || value.length === 0) continue;
    const bytes = Buffer.byteLength(value);
    if (bytes > opts.maxSessionKeyBytes) {
      throw errors.sessionKeyTooLong([source, bytes, opts.maxSessionKeyBytes], where === 'body' ? name : null);
    }
    return { key: value, source };
  }
  return null;
}

/** Identity of a request the gateway does not route by content (e.g. GET /v1/models, embeddings). */
export function identityWithoutBody(headers: IncomingHttpHeaders, opts: IdentityOptions): RequestIdentity {
  const session = sessionKeyOf(null, headers, opts);
  return {
    kind: 'other', model: null, sessionKey: session?.key ?? null, sessionKeySource: session?.source ?? null,
    chain: [], chainTokens: [], promptTokens: 0, placementKey: null,
  };
}

/** Identity of a parsed chat/completions body. */
export function identify(kind: RequestKind, body: Body, headers: IncomingHttpHeaders, opts: IdentityOptions): RequestIdentity {
  const session = sessionKeyOf(body, headers, opts);
  return {
    kind,
    model: typeof body.model === 'string' ? body.model : null,
    sessionKey: session?.key ?? null,
    sessionKeySource: session?.source ?? null,
    chain: [],
    chainTokens: [],
    promptTokens: 0,
    placementKey: null,
  };
}
