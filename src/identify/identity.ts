import type { IncomingHttpHeaders } from 'node:http';
import { defaultsOf } from '../config/defaults.js';
import { ConfigSchema, type ResolvedConfig } from '../config/schema.js';
import { errors } from '../errors.js';
import { chatChain, completionChain, NO_CHAIN, responsesChain, type Chain, type ChainOptions } from './chain.js';
import { messagesChain } from './messages-chain.js';
import { sessionKeyOf, type SessionKeyOptions } from './session-key.js';

export { sessionKeyOf } from './session-key.js';

/** What the gateway knows of a request, computed once from the parsed body and headers. */
export interface RequestIdentity {
  readonly kind: RequestKind;
  readonly model: string | null;
  /** Explicit affinity key (x-session-id, prompt_cache_key, ...), already length-checked. */
  readonly sessionKey: string | null;
  /** Where the key came from, e.g. `header:x-session-id`; bounded, safe as a log field. */
  readonly sessionKeySource: string | null;
  /** Cumulative prefix hashes: chain[i] covers links 0..i, so turn n's chain extends turn n−1's. */
  readonly chain: readonly string[];
  /** The chain's seed (model, cache_salt, tools and the rest of what precedes the messages). */
  readonly seed: string;
  /** Index of the first user message (chat), -1 when none. */
  readonly firstUser: number;
  /** Estimated prompt tokens covered by chain[0..i]. */
  readonly chainTokens: readonly number[];
  /** Estimated prompt tokens of the whole request. */
  readonly promptTokens: number;
  /** Stable key for a fresh placement when there is no session key (e.g. hash of the first user turn). */
  readonly placementKey: string | null;
  /**
   * A keyless conversation's own key: the placement key until its second user message, then the
   * chain link that ends it (callers who open with the same words part there). What its record,
   * its turns and its cooldown are kept under; null when the placement key is.
   */
  readonly conversationKey: string | null;
  /**
   * Estimated tokens before the first user message (seed + system/developer messages): a prefix
   * match no longer than this is the shared system prompt, not this conversation. 0 when unknown.
   */
  readonly sharedTokens: number;
  /** Index of the last user message in `messages` / `input`, -1 when none (a turn's anchor is chain[lastUser]). */
  readonly lastUser: number;
  /** Hash of the last user message alone: the calls of one caller turn share it (record/turns.ts). */
  readonly utterance: string | null;
  /**
   * A response stored on one replica that this request needs (Responses API): the
   * `previous_response_id` of POST /v1/responses, or the `{id}` of /v1/responses/{id}[/...]. Only
   * the replica that produced it holds it (vLLM's response store is in-process).
   */
  readonly storedResponseId: string | null;
  /** POST /v1/responses with `store` not false: the response it produces is kept by its replica. */
  readonly storesResponse: boolean;
}

/** `messages`: Anthropic's Messages API. */
export type RequestKind = 'chat' | 'completion' | 'responses' | 'messages' | 'other';

export interface IdentityOptions extends ChainOptions, SessionKeyOptions {
  /** Deepest nesting of arrays and objects accepted in a body (its walks recurse). */
  readonly jsonDepth: number;
  /** Most messages in one chat request. */
  readonly maxMessages: number;
}

/** The identity options of a running configuration. */
export function identityOptionsOf(c: Pick<ResolvedConfig, 'routing' | 'limits'>): IdentityOptions {
  return {
    sessionKeySources: c.routing.sessionKeySources,
    maxSessionKeyBytes: c.routing.maxSessionKeyBytes,
    ...c.routing.identity,
    jsonDepth: c.limits.jsonDepth,
    maxMessages: c.limits.maxMessages,
  };
}

const schemaDefaults = defaultsOf(ConfigSchema);
/** The configuration schema's defaults, as identity options. */
export const DEFAULT_IDENTITY_OPTIONS: IdentityOptions = identityOptionsOf(schemaDefaults);

type Body = Record<string, unknown>;

/**
 * True when `v` nests arrays and objects more than `left` levels deep. Recursion is bounded by
 * `left` itself, so no body can overflow the stack here (or in the walks that run after it).
 */
function deeperThan(v: unknown, left: number): boolean {
  if (typeof v !== 'object' || v === null) return false;
  if (left === 0) return true;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) if (deeperThan(v[i], left - 1)) return true;
  } else {
    for (const k in v) if (deeperThan((v as Body)[k], left - 1)) return true;
  }
  return false;
}

/**
 * Checks the fields routing relies on, with OpenAI-style 400s naming the bad parameter.
 * Everything else is the replica's to judge: the gateway forwards the original bytes.
 */
export function validateBody(kind: RequestKind, body: unknown, opts: IdentityOptions): asserts body is Body {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw errors.invalidRequest(['The request body must be a JSON object']);
  }
  if (deeperThan(body, opts.jsonDepth)) throw errors.nestingTooDeep([opts.jsonDepth]);
  const b = body as Body;
  if (b.model !== undefined && typeof b.model !== 'string') throw errors.invalidRequest(['`model` must be a string'], 'model');
  if (b.stream !== undefined && typeof b.stream !== 'boolean') throw errors.invalidRequest(['`stream` must be a boolean'], 'stream');
  if (kind === 'chat') {
    if (!Array.isArray(b.messages)) throw errors.invalidRequest(['`messages` must be an array'], 'messages');
    if (b.messages.length === 0) throw errors.invalidRequest(['`messages` must hold at least one message'], 'messages');
    if (b.messages.length > opts.maxMessages) throw errors.tooManyMessages([b.messages.length, opts.maxMessages], 'messages');
  }
  if (kind === 'messages') {
    if (!Array.isArray(b.messages)) throw errors.invalidRequest(['`messages` must be an array'], 'messages');
    if (b.messages.length === 0) throw errors.invalidRequest(['`messages` must hold at least one message'], 'messages');
    if (b.messages.length > opts.maxMessages) throw errors.tooManyMessages([b.messages.length, opts.maxMessages], 'messages');
    if (b.system !== undefined && b.system !== null && typeof b.system !== 'string' && !Array.isArray(b.system)) throw errors.invalidRequest(['`system` must be a string or an array of content blocks'], 'system');
    if (b.tools !== undefined && b.tools !== null && !Array.isArray(b.tools)) throw errors.invalidRequest(['`tools` must be an array'], 'tools');
  }
  if (kind === 'completion' && typeof b.prompt !== 'string' && !Array.isArray(b.prompt)) {
    throw errors.invalidRequest(['`prompt` must be a string or an array'], 'prompt');
  }
  if (kind === 'responses') {
    if (b.input !== undefined && typeof b.input !== 'string' && !Array.isArray(b.input)) throw errors.invalidRequest(['`input` must be a string or an array'], 'input');
    if (b.store !== undefined && b.store !== null && typeof b.store !== 'boolean') throw errors.invalidRequest(['`store` must be a boolean'], 'store');
    const prev = b.previous_response_id;
    if (prev !== undefined && prev !== null && typeof prev !== 'string') throw errors.invalidRequest(['`previous_response_id` must be a string'], 'previous_response_id');
  }
}

/**
 * A stored response's id as routing keys it (memory, Redis): '' is none, and ids are held to the
 * session-key bound (OpenAI's and vLLM's are ~37 bytes).
 */
export function responseIdOf(value: unknown, param: string | null, opts: IdentityOptions): string | null {
  if (typeof value !== 'string' || value === '') return null;
  if (value.length * 3 > opts.maxSessionKeyBytes && Buffer.byteLength(value) > opts.maxSessionKeyBytes) {
    throw errors.invalidRequest([`The response id is longer than ${opts.maxSessionKeyBytes} bytes (routing.maxSessionKeyBytes)`], param);
  }
  return value;
}

/**
 * Identity of a request the gateway does not route by content (e.g. embeddings, or
 * GET /v1/responses/{id}, whose id from the path is `storedResponseId`).
 */
export function identityWithoutBody(headers: IncomingHttpHeaders, opts: IdentityOptions, storedResponseId: string | null = null): RequestIdentity {
  const session = sessionKeyOf(null, headers, opts);
  return {
    kind: 'other', model: null, sessionKey: session?.key ?? null, sessionKeySource: session?.source ?? null, ...NO_CHAIN,
    storedResponseId: responseIdOf(storedResponseId, null, opts), storesResponse: false,
  };
}

function chainOf(kind: RequestKind, body: Body, storedResponseId: string | null, opts: IdentityOptions): Chain {
  switch (kind) {
    case 'chat': return chatChain(body, opts);
    case 'completion': return completionChain(body, opts);
    case 'messages': return messagesChain(body, opts);
    // A continuation's prompt is the stored conversation plus this input, and only its replica
    // knows the stored part: the visible input alone is no prefix of anything. Its last user
    // message (if any) still says which caller turn it belongs to.
    case 'responses': {
      const c = responsesChain(body, opts);
      return storedResponseId === null ? c : { ...NO_CHAIN, utterance: c.utterance };
    }
    case 'other': return NO_CHAIN;
  }
}

/**
 * Identity of a parsed chat/completions/responses/messages body: the session key and the prefix chain,
 * computed once per request from the already-parsed body. Never throws for shapes it does not
 * understand (the replica judges those); only an over-long session key or response id is an error here.
 */
export function identify(kind: RequestKind, body: Body, headers: IncomingHttpHeaders, opts: IdentityOptions): RequestIdentity {
  const session = sessionKeyOf(body, headers, opts);
  const storedResponseId = kind === 'responses' ? responseIdOf(body.previous_response_id, 'previous_response_id', opts) : null;
  const ch = chainOf(kind, body, storedResponseId, opts);
  return {
    kind,
    model: typeof body.model === 'string' ? body.model : null,
    sessionKey: session?.key ?? null,
    sessionKeySource: session?.source ?? null,
    chain: ch.chain,
    seed: ch.seed,
    firstUser: ch.firstUser,
    chainTokens: ch.chainTokens,
    promptTokens: ch.promptTokens,
    placementKey: ch.placementKey,
    conversationKey: ch.conversationKey,
    sharedTokens: ch.sharedTokens,
    lastUser: ch.lastUser,
    utterance: ch.utterance,
    storedResponseId,
    storesResponse: kind === 'responses' && body.store !== false,
  };
}
