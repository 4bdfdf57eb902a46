import type { IncomingHttpHeaders } from 'node:http';
import { errors } from '../errors.js';
import { chatChain, completionChain, type Chain, type ChainOptions } from './chain.js';
import type { RequestIdentity } from './types.js';

/** One place a session key may come from. */
export interface SessionKeySource {
  readonly from: 'header' | 'body';
  /** Header name (matched lower-case, as node delivers them) or top-level body field. */
  readonly name: string;
  /** Listed but off: keeps the documented order visible in config while not trusting the source. */
  readonly enabled?: boolean;
}

export interface IdentityOptions {
  /**
   * Ordered sources of the session key; the first enabled source holding a non-empty string (or a
   * number) wins. A string is shorthand for an enabled source: `header:<name>` or `body:<field>`.
   */
  readonly sessionKeySources: readonly (string | SessionKeySource)[];
  /** Longer keys are a 400 `session_key_too_long` (keys land in memory and in Redis). */
  readonly maxSessionKeyBytes: number;
  /** Token estimate: UTF-8 bytes per token (default 4: English prose, where bytes = chars). */
  readonly bytesPerToken?: number;
  /** Completions: bytes of a string prompt per chain link (default 64 ≈ 16 tokens ≈ one vLLM block). */
  readonly blockBytes?: number;
  /** Completions: token ids per chain link for token-array prompts (default 16, vLLM's block size). */
  readonly blockTokens?: number;
  /** Completions: the placement key is the link ending this many blocks in (default 16 ≈ 256 tokens). */
  readonly placementBlocks?: number;
}

/**
 * `user` is listed but off: one OpenAI `user` often holds several concurrent sessions, and pinning
 * them all to one replica would both overload it and share nothing useful.
 */
export const DEFAULT_SESSION_KEY_SOURCES: readonly SessionKeySource[] = [
  { from: 'header', name: 'x-session-id', enabled: true },
  { from: 'header', name: 'x-session-affinity', enabled: true },
  { from: 'body', name: 'prompt_cache_key', enabled: true },
  { from: 'body', name: 'session_id', enabled: true },
  { from: 'body', name: 'user', enabled: false },
];

export const DEFAULT_IDENTITY_OPTIONS = {
  sessionKeySources: DEFAULT_SESSION_KEY_SOURCES,
  maxSessionKeyBytes: 256,
  bytesPerToken: 4,
  blockBytes: 64,
  blockTokens: 16,
  placementBlocks: 16,
} as const satisfies Required<IdentityOptions>;

export type RequestKind = RequestIdentity['kind'];

type Body = Record<string, unknown>;

interface CompiledSource { readonly header: boolean; readonly name: string; readonly label: string }
interface Compiled extends ChainOptions { readonly sources: readonly CompiledSource[]; readonly maxKeyBytes: number }

/** Options are parsed once per options object, not per request. */
const compiledCache = new WeakMap<IdentityOptions, Compiled>();

function compile(opts: IdentityOptions): Compiled {
  let c = compiledCache.get(opts);
  if (c !== undefined) return c;
  const sources: CompiledSource[] = [];
  for (const s of opts.sessionKeySources) {
    let src: SessionKeySource;
    if (typeof s === 'string') {
      const colon = s.indexOf(':');
      const from = s.slice(0, colon);
      if (from !== 'header' && from !== 'body') throw new Error(`session key source ${JSON.stringify(s)}: expected header:<name> or body:<field>`);
      src = { from, name: s.slice(colon + 1) };
    } else {
      src = s;
    }
    if (src.enabled === false || src.name === '') continue;
    const name = src.from === 'header' ? src.name.toLowerCase() : src.name;
    sources.push({ header: src.from === 'header', name, label: `${src.from}:${name}` });
  }
  const d = DEFAULT_IDENTITY_OPTIONS;
  c = {
    sources,
    maxKeyBytes: opts.maxSessionKeyBytes,
    bytesPerToken: opts.bytesPerToken ?? d.bytesPerToken,
    blockBytes: opts.blockBytes ?? d.blockBytes,
    blockTokens: opts.blockTokens ?? d.blockTokens,
    placementBlocks: opts.placementBlocks ?? d.placementBlocks,
  };
  compiledCache.set(opts, c);
  return c;
}

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

/** The session key from the first enabled source that has one; over-long keys are a 400. */
export function sessionKeyOf(
  body: Body | null,
  headers: IncomingHttpHeaders,
  opts: IdentityOptions,
): { key: string; source: string } | null {
  const c = compile(opts);
  for (const src of c.sources) {
    let value: unknown = src.header ? headers[src.name] : body === null ? undefined : body[src.name];
    if (Array.isArray(value)) value = value[0];
    if (typeof value === 'number' && Number.isFinite(value)) value = String(value);
    if (typeof value !== 'string' || value.length === 0) continue;
    // Cheap bound first: a UTF-16 length within max/3 cannot exceed max bytes.
    if (value.length * 3 > c.maxKeyBytes) {
      const bytes = Buffer.byteLength(value);
      if (bytes > c.maxKeyBytes) {
        throw errors.sessionKeyTooLong([src.label, bytes, c.maxKeyBytes], src.header ? null : src.name);
      }
    }
    return { key: value, source: src.label };
  }
  return null;
}

/** Identity of a request the gateway does not route by content (e.g. GET /v1/models, embeddings). */
export function identityWithoutBody(headers: IncomingHttpHeaders, opts: IdentityOptions): RequestIdentity {
  const session = sessionKeyOf(null, headers, opts);
  return {
    kind: 'other', model: null, sessionKey: session?.key ?? null, sessionKeySource: session?.source ?? null,
    chain: [], chainTokens: [], promptTokens: 0, placementKey: null, sharedTokens: 0,
  };
}

const NO_CHAIN: Chain = { chain: [], chainTokens: [], promptTokens: 0, placementKey: null, sharedTokens: 0 };

/**
 * Identity of a parsed chat/completions body: the session key and the prefix chain, computed once
 * per request from the already-parsed body. Never throws for shapes it does not understand (the
 * replica judges those); only an over-long session key is an error here.
 */
export function identify(kind: RequestKind, body: Body, headers: IncomingHttpHeaders, opts: IdentityOptions): RequestIdentity {
  const session = sessionKeyOf(body, headers, opts);
  const c = compile(opts);
  const ch = kind === 'chat' ? chatChain(body, c) : kind === 'completion' ? completionChain(body, c) : NO_CHAIN;
  return {
    kind,
    model: typeof body.model === 'string' ? body.model : null,
    sessionKey: session?.key ?? null,
    sessionKeySource: session?.source ?? null,
    chain: ch.chain,
    chainTokens: ch.chainTokens,
    promptTokens: ch.promptTokens,
    placementKey: ch.placementKey,
    sharedTokens: ch.sharedTokens,
  };
}
