// vLLM's Responses API store (VLLM_ENABLE_RESPONSES_API_STORE=1): stored responses live in the
// API server's memory, per replica. A follow-up naming one (previous_response_id) can only be
// served by the replica that stored it; a restart forgets them all.

import type { ChatMessage } from './tokenizer.js';

export interface StoredResponse {
  id: string;
  /** The messages the request was rendered from (its instructions as a system message first). */
  messages: ChatMessage[];
  /** The assistant text it produced ('' for a tool call: vLLM carries only message outputs over). */
  outputText: string;
  /** The whole response object, as GET /v1/responses/{id} returns it. */
  body: string;
}

export interface ResponseStore {
  get(id: string): StoredResponse | undefined;
  put(r: StoredResponse): void;
  clear(): void;
}

/**
 * vLLM never evicts (its own comment calls the store a memory leak); the simulator keeps the most
 * recent MAX_STORED so a long benchmark cannot grow it without bound. Oldest go first.
 */
const MAX_STORED = 100_000;

export function createResponseStore(): ResponseStore {
  const byId = new Map<string, StoredResponse>();
  return {
    get: (id) => byId.get(id),
    put(r) {
      byId.set(r.id, r);
      if (byId.size > MAX_STORED) byId.delete(byId.keys().next().value as string);
    },
    clear: () => byId.clear(),
  };
}
