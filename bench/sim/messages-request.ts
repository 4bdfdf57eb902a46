// POST /v1/messages and /v1/messages/count_tokens the way vLLM's Anthropic entrypoint reads them
// (vllm/entrypoints/anthropic/): the request is turned into a chat completion request — the system
// prompt (a string, or its text blocks joined, Claude Code's billing header dropped) as a system
// message, text blocks as content, tool_use blocks as the assistant's tool calls, a user's
// tool_result blocks as tool messages, tools as functions, tool_choice auto/any/tool/none as
// auto/required/named/none — then rendered by the chat template. `cache_control` and `metadata`
// reach no prompt token. Errors met while serving (an unknown model, a prompt too long) come back
// in Anthropic's shape; request-validation errors keep the shape of vLLM's app-wide handler.

import type { SimConfig } from './config.js';
import { errors, type HttpError } from './errors.js';
import { checkLength, common, isObj, maxTokensField, pickTool, type GenRequest } from './request.js';
import { renderChat, type ChatMessage, type ContentPart } from './tokenizer.js';

type Obj = Record<string, unknown>;

const BILLING_HEADER = 'x-anthropic-billing-header';

/** vLLM's translate_error_response: the OpenAI-style error's type and message under Anthropic's envelope, same status. */
export function anthropicError(e: HttpError): HttpError {
  let inner: Obj | null = null;
  try {
    const parsed = JSON.parse(e.body) as unknown;
    if (isObj(parsed) && isObj(parsed.error)) inner = parsed.error;
  } catch {
    // Not JSON (a bare 404/405 detail): left as it is.
  }
  // FastAPI's RequestValidationError handler answers for every route alike.
  if (inner === null || inner.type === 'Bad Request') return e;
  return { status: e.status, body: JSON.stringify({ type: 'error', error: { type: inner.type, message: inner.message } }) };
}

function systemText(system: unknown): string {
  if (typeof system === 'string') return system;
  if (!Array.isArray(system)) return '';
  let text = '';
  for (const b of system) {
    if (!isObj(b) || b.type !== 'text' || typeof b.text !== 'string' || b.text === '') continue;
    if (b.text.startsWith(BILLING_HEADER)) continue;
    text += b.text;
  }
  return text;
}

function toolResultText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.filter((c) => isObj(c) && c.type === 'text' && typeof c.text === 'string').map((c) => (c as Obj).text as string).join('\n');
}

/** Anthropic messages → chat messages (vLLM's _convert_messages). */
function chatMessages(body: Obj): ChatMessage[] | HttpError {
  const out: ChatMessage[] = [];
  const system = systemText(body.system);
  if (system !== '') out.push({ role: 'system', content: system });
  for (const raw of body.messages as unknown[]) {
    if (!isObj(raw) || (raw.role !== 'user' && raw.role !== 'assistant')) return errors.invalid('messages', "Input should be 'user' or 'assistant'", 'literal_error');
    const role = raw.role;
    if (typeof raw.content === 'string') { out.push({ role, content: raw.content }); continue; }
    if (!Array.isArray(raw.content)) return errors.invalid('messages', 'Input should be a valid string or list');
    if (raw.content.length === 0) return anthropicError(errors.badRequest('message content must not be empty'));
    const parts: ContentPart[] = [];
    const calls: NonNullable<ChatMessage['tool_calls']> = [];
    for (const b of raw.content) {
      if (!isObj(b)) return errors.invalid('messages', 'Input should be a valid dictionary');
      if (b.type === 'text' && typeof b.text === 'string' && b.text !== '') parts.push({ type: 'text', text: b.text });
      else if (b.type === 'tool_use') {
        calls.push({ id: typeof b.id === 'string' ? b.id : '', type: 'function', function: { name: typeof b.name === 'string' ? b.name : '', arguments: JSON.stringify(b.input ?? {}) } });
      } else if (b.type === 'tool_result') {
        if (role === 'user') out.push({ role: 'tool', tool_call_id: typeof b.tool_use_id === 'string' ? b.tool_use_id : '', content: toolResultText(b.content) });
        else parts.push({ type: 'text', text: `Tool result: ${toolResultText(b.content)}` });
      }
    }
    if (parts.length === 0 && calls.length === 0) continue;
    const msg: ChatMessage = { role };
    if (parts.length > 0) msg.content = parts.length === 1 ? parts[0].text : parts;
    if (calls.length > 0) msg.tool_calls = calls;
    out.push(msg);
  }
  return out;
}

/** Anthropic tools → chat functions; tool_choice → chat's. */
function chatTools(body: Obj): { tools: unknown[] | undefined; choice: unknown } | HttpError {
  if (body.tools === undefined || body.tools === null) return { tools: undefined, choice: undefined };
  if (!Array.isArray(body.tools)) return errors.invalid('tools', 'Input should be a valid list');
  const tools: unknown[] = [];
  for (const t of body.tools) {
    if (!isObj(t) || typeof t.name !== 'string' || !isObj(t.input_schema)) return errors.missing('tools');
    tools.push({ type: 'function', function: { name: t.name, description: t.description, parameters: t.input_schema } });
  }
  const c = body.tool_choice;
  let choice: unknown = 'auto';
  if (isObj(c)) {
    if (c.type === 'any') choice = 'required';
    else if (c.type === 'none') choice = 'none';
    else if (c.type === 'tool') {
      if (typeof c.name !== 'string' || c.name === '') return anthropicError(errors.badRequest("tool_choice.name is required when tool_choice.type is 'tool'"));
      choice = { type: 'function', function: { name: c.name } };
    }
  }
  return { tools, choice };
}

/** What both routes read: the model and the conversation, rendered. */
function rendered(body: unknown, cfg: SimConfig): { body: Obj; prompt: number[]; tools: unknown[] | undefined; choice: unknown; messages: ChatMessage[] } | HttpError {
  if (!isObj(body)) return errors.invalid('', 'Input should be a valid dictionary');
  if (typeof body.model !== 'string') return errors.missing('model');
  if (body.messages === undefined) return errors.missing('messages');
  if (!Array.isArray(body.messages)) return errors.invalid('messages', 'Input should be a valid list', 'list_type', body.messages);
  if (body.messages.length === 0) return anthropicError(errors.badRequest('messages must contain at least one item'));
  if (body.model !== cfg.model) return anthropicError(errors.unknownModel(body.model, cfg.model));
  const messages = chatMessages(body);
  if (!Array.isArray(messages)) return messages;
  const t = chatTools(body);
  if ('status' in t) return t;
  return { body, prompt: renderChat(messages, t.tools ?? null), tools: t.tools, choice: t.choice, messages };
}

export function parseMessages(raw: unknown, cfg: SimConfig): GenRequest | HttpError {
  const r = rendered(raw, cfg);
  if ('status' in r) return r;
  const { body } = r;
  if (body.max_tokens === undefined || body.max_tokens === null) return errors.missing('max_tokens');
  const m = maxTokensField(body, 'max_tokens');
  if (typeof m === 'object') return anthropicError(m);
  // The chat request vLLM builds carries none of the body's other fields (priority, cache_salt).
  const c = common({ model: body.model, stream: body.stream }, cfg);
  if ('status' in c) return anthropicError(c);
  const t = pickTool({ tools: r.tools, tool_choice: r.choice }, r.messages);
  if ('status' in t) return anthropicError(t);
  const maxTokens = checkLength(cfg, r.prompt, m);
  if (typeof maxTokens === 'object') return anthropicError(maxTokens);
  return { kind: 'messages', stream: c.stream, includeUsage: true, prompt: r.prompt, maxTokens, tool: t.tool, toolParser: t.parser, toolNamed: !!t.named, priority: 0 };
}

/** count_tokens: the rendered prompt's length, as vLLM's AnthropicCountTokensResponse dumps it. */
export function countTokens(raw: unknown, cfg: SimConfig): HttpError | string {
  const r = rendered(raw, cfg);
  if ('status' in r) return r;
  const n = r.prompt.length;
  return JSON.stringify({ input_tokens: n, context_management: { original_input_tokens: n } });
}
