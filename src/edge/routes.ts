import { VLLM_OPERATOR_PATHS } from '../config/schema.js';
import type { ErrorShape } from '../errors.js';
import type { RequestKind } from '../identify/identity.js';

/** What the data plane does with a path. */
export type RouteKind =
  /** A JSON body the gateway reads to identify and route the request. */
  | { readonly json: RequestKind }
  /** Answered by the gateway itself. */
  | { readonly models: true }
  /**
   * Forwarded to a routed replica as is (embeddings, audio, score, rerank: FORWARDED_PATHS). `responseId`: the path names a
   * stored response (/v1/responses/{id}[/cancel|/input_items]), held by one replica only.
   */
  | { readonly passthrough: true; readonly responseId?: string };

interface Entry { readonly kind: RouteKind; readonly methods: readonly string[] }

const ROUTES: ReadonlyMap<string, Entry> = new Map<string, Entry>([
  ['/v1/chat/completions', { kind: { json: 'chat' }, methods: ['POST'] }],
  ['/v1/completions', { kind: { json: 'completion' }, methods: ['POST'] }],
  ['/v1/responses', { kind: { json: 'responses' }, methods: ['POST'] }],
  ['/v1/messages', { kind: { json: 'messages' }, methods: ['POST'] }],
  // Read for its model only (no prompt chain): it goes to a replica that serves the model, as a
  // generation would, and answers at once.
  ['/v1/messages/count_tokens', { kind: { json: 'other' }, methods: ['POST'] }],
  ['/v1/models', { kind: { models: true }, methods: ['GET', 'HEAD'] }],
]);

const PASSTHROUGH: RouteKind = { passthrough: true };

/**
 * The other /v1/* routes vLLM's OpenAI-compatible server serves to clients, forwarded as they are.
 * Anything else under /v1/ is a 404 here, not a passthrough: vLLM also mounts operator routes
 * there (`/v1/load_lora_adapter`, `/v1/unload_lora_adapter`) that no client of the gateway should
 * reach. `routes.extraPaths` in the config adds to this list.
 */
export const FORWARDED_PATHS: readonly string[] = [
  '/v1/embeddings',
  '/v1/audio/transcriptions',
  '/v1/audio/translations',
  '/v1/score',
  '/v1/rerank',
];

function forwarded(path: string, extra: readonly string[]): boolean {
  if (FORWARDED_PATHS.includes(path)) return true;
  // Not even under an extra prefix: a client never loads or unloads an adapter.
  if (VLLM_OPERATOR_PATHS.includes(path)) return false;
  for (const p of extra) if (p.endsWith('/*') ? path.startsWith(p.slice(0, -1)) : path === p) return true;
  return false;
}

/**
 * The API shape of the errors the gateway writes for a path: Anthropic's under /v1/messages (its
 * SDKs read theirs, and a route of that API the gateway lacks is still that API's 404), OpenAI's
 * everywhere else.
 */
export function errorShapeOf(path: string): ErrorShape {
  return path.startsWith('/v1/messages') && (path.length === 12 || path[12] === '/') ? 'anthropic' : 'openai';
}

/** A stored response and what can be asked of it (OpenAI's retrieve, delete, cancel, input items). */
const STORED_RESPONSE = /^\/v1\/responses\/([^/]+)(?:\/(?:cancel|input_items))?$/;

/**
 * The route of a normalised path: its own entry, a stored response, or a path forwarded as is
 * (FORWARDED_PATHS and `extraPaths`: exact, or a prefix ending in `/*`). null: not a path the
 * gateway serves. `allowed` lists the methods when this one is not among them.
 */
export function routeOf(path: string, method: string, extraPaths: readonly string[] = []): { kind: RouteKind; allowed: null } | { kind: null; allowed: readonly string[] } | null {
  const e = ROUTES.get(path);
  if (e !== undefined) return e.methods.includes(method) ? { kind: e.kind, allowed: null } : { kind: null, allowed: e.methods };
  if (!path.startsWith('/v1/')) return null;
  const stored = path.startsWith('/v1/responses/') ? STORED_RESPONSE.exec(path) : null;
  if (stored !== null) return { kind: { passthrough: true, responseId: stored[1] }, allowed: null };
  return forwarded(path, extraPaths) ? { kind: PASSTHROUGH, allowed: null } : null;
}
