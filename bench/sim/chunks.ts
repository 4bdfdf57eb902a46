// Response bodies in vLLM's shapes. Streamed chunks follow serving_chat.py / serving_completion.py
// (model_dump_json(exclude_unset=True): fields vLLM sets explicitly appear, even as null); the
// usage chunk drops nulls; non-streamed bodies carry every field. Field sets as vLLM 0.32 sends
// them (checked against a real replica by test/real/surface.real.ts).

import type { TokenDelta } from './output.js';

export interface Usage {
  promptTokens: number;
  completionTokens: number;
  /** null: --enable-prompt-tokens-details is off, the field is left out. */
  cachedTokens: number | null;
}

export interface ResponseIdentity {
  id: string;
  created: number;
  model: string;
}

/** vLLM puts `vllm-<version>-<build hash>` here; the simulator names itself. */
export const SYSTEM_FINGERPRINT = 'vllm-0.32.0-simulator';

export const sse = (json: string): string => `data: ${json}\n\n`;
export const SSE_DONE = 'data: [DONE]\n\n';

/** The streamed usage chunk's usage; chat reports created_cache_tokens there, completions do not. */
function usageObj(u: Usage, chat: boolean): Record<string, unknown> {
  const o: Record<string, unknown> = {
    prompt_tokens: u.promptTokens,
    total_tokens: u.promptTokens + u.completionTokens,
    completion_tokens: u.completionTokens,
  };
  if (u.cachedTokens !== null) o.prompt_tokens_details = chat ? { cached_tokens: u.cachedTokens, created_cache_tokens: 0 } : { cached_tokens: u.cachedTokens };
  return o;
}

function head(r: ResponseIdentity, object: string): string {
  return `{"id":${JSON.stringify(r.id)},"object":"${object}","created":${r.created},"model":${JSON.stringify(r.model)}`;
}

export function deltaJson(d: TokenDelta, toolParser: boolean): string | null {
  switch (d.t) {
    case 'text':
      // The EOS detokenizes to "", which a tool parser swallows (an empty DeltaMessage).
      if (d.text === '' && toolParser) return '{}';
      return `{"content":${JSON.stringify(d.text)}}`;
    case 'tool-name':
      return JSON.stringify({
        tool_calls: [{ index: 0, id: d.id, type: 'function', function: { name: d.name, arguments: '' } }],
      });
    case 'tool-args':
      return JSON.stringify({ tool_calls: [{ index: 0, function: { arguments: d.args } }] });
    case 'none':
      return null;
  }
}

export const chatChunks = {
  role(r: ResponseIdentity): string {
    return sse(
      `${head(r, 'chat.completion.chunk')},"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"prompt_token_ids":null,"prompt_text":null}`,
    );
  },
  /** A token's chunk; null when the token streams nothing (a tool parser still buffering). */
  token(r: ResponseIdentity, delta: string | null, finish: string | null): string | null {
    if (finish === null) {
      if (delta === null) return null;
      return sse(
        `${head(r, 'chat.completion.chunk')},"choices":[{"index":0,"delta":${delta},"logprobs":null,"finish_reason":null,"token_ids":null}]}`,
      );
    }
    return sse(
      `${head(r, 'chat.completion.chunk')},"choices":[{"index":0,"delta":${delta ?? '{}'},"logprobs":null,"finish_reason":"${finish}","stop_reason":null,"token_ids":null}]}`,
    );
  },
  usage(r: ResponseIdentity, u: Usage): string {
    return sse(`${head(r, 'chat.completion.chunk')},"choices":[],"usage":${JSON.stringify(usageObj(u, true))},"system_fingerprint":"${SYSTEM_FINGERPRINT}"}`);
  },
};

export const completionChunks = {
  token(r: ResponseIdentity, text: string, finish: string | null): string {
    const f = finish === null ? 'null' : `"${finish}"`;
    return sse(
      `${head(r, 'text_completion')},"choices":[{"index":0,"text":${JSON.stringify(text)},"logprobs":null,"finish_reason":${f},"stop_reason":null,"prompt_token_ids":null,"token_ids":null}]}`,
    );
  },
  usage(r: ResponseIdentity, u: Usage): string {
    return sse(`${head(r, 'text_completion')},"choices":[],"usage":${JSON.stringify(usageObj(u, false))},"system_fingerprint":"${SYSTEM_FINGERPRINT}"}`);
  },
};

/** A non-streamed body's usage: chat counts created_cache_tokens, completions leave it null. */
function fullUsage(u: Usage, chat: boolean): Record<string, unknown> {
  return {
    ...usageObj(u, chat),
    prompt_tokens_details: u.cachedTokens === null ? null : { cached_tokens: u.cachedTokens, created_cache_tokens: chat ? 0 : null, multimodal_tokens: null },
    completion_tokens_details: null,
  };
}

export interface ToolCallOut {
  id: string;
  name: string;
  arguments: string;
}

export function chatCompletionBody(
  r: ResponseIdentity,
  content: string | null,
  toolCalls: ToolCallOut[],
  finish: string,
  u: Usage,
): string {
  const message: Record<string, unknown> = {
    role: 'assistant',
    content,
    refusal: null,
    annotations: null,
    audio: null,
    function_call: null,
  };
  if (toolCalls.length > 0) {
    message.tool_calls = toolCalls.map((t) => ({
      id: t.id,
      type: 'function',
      function: { name: t.name, arguments: t.arguments },
    }));
  }
  message.reasoning = null;
  return JSON.stringify({
    id: r.id,
    object: 'chat.completion',
    created: r.created,
    model: r.model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: finish, stop_reason: null, token_ids: null, routed_experts: null }],
    service_tier: null,
    system_fingerprint: SYSTEM_FINGERPRINT,
    usage: fullUsage(u, true),
    prompt_logprobs: null,
    prompt_token_ids: null,
    prompt_text: null,
    kv_transfer_params: null,
    ec_transfer_params: null,
    metrics: null,
  });
}

export function completionBody(r: ResponseIdentity, text: string, finish: string, u: Usage): string {
  return JSON.stringify({
    id: r.id,
    object: 'text_completion',
    created: r.created,
    model: r.model,
    choices: [{ index: 0, text, logprobs: null, finish_reason: finish, stop_reason: null, token_ids: null, prompt_logprobs: null, prompt_token_ids: null, routed_experts: null }],
    service_tier: null,
    system_fingerprint: SYSTEM_FINGERPRINT,
    usage: fullUsage(u, false),
    kv_transfer_params: null,
    ec_transfer_params: null,
    metrics: null,
  });
}
