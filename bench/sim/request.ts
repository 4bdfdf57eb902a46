// Parse and validate a /v1/chat/completions or /v1/completions body the way vLLM's pydantic
// models and serving checks do, and turn it into what the engine needs: prompt tokens, limits,
// salt, and whether (and which) tool gets called.

import type { SimConfig } from './config.js';
import { errors, type HttpError } from './errors.js';
import type { ToolSpec } from './output.js';
import { contentText, renderChat, tokenizePrompt, type ChatMessage } from './tokenizer.js';

/** What a Responses request carries beyond the engine's prompt: echoed in the response object, kept by the store. */
export interface ResponsesMeta {
  /** resp_<32 hex>, as vLLM names them. */
  id: string;
  instructions: string | null;
  /** As sent (the Responses API's flat function tools). */
  tools: unknown[];
  toolChoice: unknown;
  previousResponseId: string | null;
  /** Kept in this replica's store once complete (store is true by default). */
  store: boolean;
  maxOutputTokens: number | null;
  /** The messages the prompt was rendered from, stored for follow-ups. */
  messages: ChatMessage[];
}

export interface GenRequest {
  /** `messages`: Anthropic's Messages API (run as a chat completion, as vLLM does). */
  kind: 'chat' | 'completion' | 'responses' | 'messages';
  stream: boolean;
  includeUsage: boolean;
  prompt: number[];
  /** From the request, or vLLM's default (16 for completions, the rest of the context for chat). */
  maxTokens: number;
  cacheSalt?: string;
  /** The tool the answer will call, if any. */
  tool?: ToolSpec;
  /** A tool parser runs (tools given, tool_choice not "none"): changes the final chunk's delta. */
  toolParser: boolean;
  /** tool_choice named a function: vLLM then finishes with "stop", not "tool_calls". */
  toolNamed: boolean;
  /** POST /v1/responses: what the response object echoes and what the store keeps. */
  responses?: ResponsesMeta;
  /** vLLM's `priority` (lower first); 0 when not given. */
  priority?: number;
  /** vLLM's `ignore_eos`: the answer runs to its max_tokens rather than its natural length. */
  ignoreEos?: boolean;
  /** The LoRA adapter the request names (lora.ts); absent for the base model. */
  lora?: string;
}

type Body = Record<string, unknown>;

export const isObj = (x: unknown): x is Body => !!x && typeof x === 'object' && !Array.isArray(x);

export function common(body: Body, cfg: SimConfig): HttpError | { stream: boolean; includeUsage: boolean; cacheSalt?: string; priority: number; ignoreEos: boolean } {
  if (body.model !== undefined && body.model !== null && body.model !== cfg.model) {
    return errors.unknownModel(String(body.model), cfg.model);
  }
  if (body.stream !== undefined && body.stream !== null && typeof body.stream !== 'boolean') {
    return errors.invalid('stream', 'Input should be a valid boolean');
  }
  if (body.cache_salt !== undefined && body.cache_salt !== null && (typeof body.cache_salt !== 'string' || !body.cache_salt)) {
    return errors.invalid('cache_salt', "Value error, Parameter 'cache_salt' must be a non-empty string if provided.");
  }
  // StreamOptions.include_usage defaults to true once stream_options is present.
  const p = body.priority ?? 0;
  if (typeof p !== 'number' || !Number.isInteger(p)) return errors.invalid('priority', 'Input should be a valid integer', 'int_type', p);
  // vLLM's processor: a priority under fcfs scheduling is an error, not ignored.
  if (p !== 0 && cfg.schedulingPolicy !== 'priority') return errors.badRequest(`Got priority ${p} but Priority scheduling is not enabled.`, 'priority');
  if (body.ignore_eos !== undefined && body.ignore_eos !== null && typeof body.ignore_eos !== 'boolean') return errors.invalid('ignore_eos', 'Input should be a valid boolean');
  const so = body.stream_options;
  const includeUsage = isObj(so) ? so.include_usage !== false && so.include_usage !== null : false;
  return { stream: body.stream === true, includeUsage, cacheSalt: (body.cache_salt as string | undefined) ?? undefined, priority: p, ignoreEos: body.ignore_eos === true };
}

export function maxTokensField(body: Body, field: string): HttpError | number | undefined {
  const v = body[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v === 'string') return errors.invalid(field, 'Input should be a valid integer, unable to parse string as an integer', 'int_parsing', v);
  if (typeof v === 'number' && !Number.isInteger(v)) return errors.invalid(field, 'Input should be a valid integer, got a number with a fractional part', 'int_from_float', String(v));
  if (typeof v !== 'number') return errors.invalid(field, 'Input should be a valid integer', 'int_type', v);
  if (v < 1) return errors.badRequest(`${field} must be at least 1, got ${v}. (parameter=${field}, value=${v})`, field);
  return v;
}

export function checkLength(cfg: SimConfig, prompt: number[], maxTokens: number | undefined): HttpError | number {
  if (prompt.length >= cfg.maxModelLen) return errors.contextTooLong(cfg.maxModelLen);
  if (maxTokens !== undefined && prompt.length + maxTokens > cfg.maxModelLen) {
    return errors.maxTokensTooLarge(maxTokens, cfg.maxModelLen, prompt.length);
  }
  return maxTokens ?? cfg.maxModelLen - prompt.length;
}

export function pickTool(
  body: Body,
  messages: ChatMessage[],
): HttpError | { tool?: ToolSpec; parser: boolean; named?: boolean } {
  const tools = Array.isArray(body.tools) ? (body.tools as { function?: ToolSpec }[]) : [];
  const choice = body.tool_choice ?? (tools.length > 0 ? 'auto' : 'none');
  const specs = tools.map((t) => t?.function).filter((f): f is ToolSpec => !!f && typeof f.name === 'string');
  if (specs.length !== tools.length) return errors.invalid('tools', 'Field required');
  if (choice === 'none') return { parser: false };
  if (specs.length === 0) return errors.badRequest('When using `tool_choice`, `tools` must be set.', 'tool_choice');
  if (isObj(choice)) {
    const name = isObj(choice.function) ? choice.function.name : undefined;
    const named = specs.find((s) => s.name === name);
    if (!named) return errors.badRequest(`Tool '${String(name)}' has not been passed in \`tools\`.`, 'tool_choice');
    return { tool: named, parser: true, named: true };
  }
  if (choice === 'required') return { tool: specs[0], parser: true };
  if (choice !== 'auto') return errors.invalid('tool_choice', "Input should be 'none', 'auto' or 'required'");
  // "auto": call a tool when the user's last turn asks for one.
  const last = messages[messages.length - 1];
  const text = last && last.role === 'user' ? contentText(last.content) : '';
  if (!/\b(call|tool)/i.test(text)) return { parser: true };
  const lower = text.toLowerCase();
  return { tool: specs.find((s) => lower.includes(s.name.toLowerCase())) ?? specs[0], parser: true };
}

export function parseChat(body: unknown, cfg: SimConfig): GenRequest | HttpError {
  if (!isObj(body)) return errors.invalid('', 'Input should be a valid dictionary');
  if (body.messages === undefined) return errors.missing('messages');
  if (!Array.isArray(body.messages)) return errors.invalid('messages', 'Input should be a valid list', 'list_type', body.messages);
  for (const m of body.messages) {
    if (!isObj(m) || typeof m.role !== 'string') return errors.invalid('messages', 'Field required');
    if (m.content !== undefined && m.content !== null && typeof m.content !== 'string' && !Array.isArray(m.content)) {
      return errors.invalid('messages', 'Input should be a valid string');
    }
  }
  const messages = body.messages as ChatMessage[];
  const c = common(body, cfg);
  if ('status' in c) return c;
  const a = maxTokensField(body, 'max_completion_tokens');
  if (typeof a === 'object') return a;
  const b = maxTokensField(body, 'max_tokens');
  if (typeof b === 'object') return b;
  const t = pickTool(body, messages);
  if ('status' in t) return t;
  const continueFinal = body.continue_final_message === true;
  if (continueFinal && body.add_generation_prompt !== false) {
    return errors.badRequest('Cannot set both `continue_final_message` and `add_generation_prompt` to True.', 'continue_final_message');
  }
  const prompt = renderChat(messages, Array.isArray(body.tools) ? body.tools : null, { continueFinal });
  const maxTokens = checkLength(cfg, prompt, a ?? b);
  if (typeof maxTokens === 'object') return maxTokens;
  return { kind: 'chat', ...c, prompt, maxTokens, tool: t.tool, toolParser: t.parser, toolNamed: !!t.named };
}

export function parseCompletion(body: unknown, cfg: SimConfig): GenRequest | HttpError {
  if (!isObj(body)) return errors.invalid('', 'Input should be a valid dictionary');
  if (body.prompt === undefined || body.prompt === null) return errors.missing('prompt');
  let p: unknown = body.prompt;
  // A batch of one is accepted; larger batches are outside what the sim models.
  if (Array.isArray(p) && p.length === 1 && (typeof p[0] === 'string' || Array.isArray(p[0]))) p = p[0];
  const ok = typeof p === 'string' || (Array.isArray(p) && p.length > 0 && p.every((x) => Number.isInteger(x)));
  if (!ok) return errors.badRequest('The simulator serves one prompt per request: a string or a list of token ids.', 'prompt');
  const c = common(body, cfg);
  if ('status' in c) return c;
  const m = maxTokensField(body, 'max_tokens');
  if (typeof m === 'object') return m;
  const prompt = tokenizePrompt(p as string | number[]);
  const maxTokens = checkLength(cfg, prompt, m ?? 16);
  if (typeof maxTokens === 'object') return maxTokens;
  return { kind: 'completion', ...c, prompt, maxTokens, toolParser: false, toolNamed: false };
}
