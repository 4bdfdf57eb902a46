// POST /v1/responses the way vLLM's serving_responses.py reads it (the non-Harmony path): the
// request's instructions as a system message, then — with previous_response_id — the stored
// request's messages (its system message dropped: instructions do not carry over) and the stored
// response's text as an assistant message, then the new input. The messages are rendered by the
// chat template, so the prefix cache sees a follow-up extend the previous prompt and answer, as
// on vLLM. An id this replica never stored is vLLM's 404.

import type { SimConfig } from './config.js';
import { errors, validationError, type HttpError } from './errors.js';
import { randomHex } from './hash.js';
import { checkLength, common, isObj, maxTokensField, pickTool, type GenRequest } from './request.js';
import type { ResponseStore } from './response-store.js';
import { renderChat, type ChatMessage } from './tokenizer.js';

type Item = Record<string, unknown>;

/** The roles an input message may have (the openai types vLLM validates `input` with). */
const MESSAGE_ROLES = ['user', 'assistant', 'system', 'developer'];

/** Responses API input items → chat messages (vLLM's construct_chat_messages_with_tool_call). */
function inputMessages(input: unknown): ChatMessage[] | HttpError {
  if (typeof input === 'string') return [{ role: 'user', content: input }];
  if (!Array.isArray(input)) return errors.invalid('input', 'Input should be a valid string or list');
  const out: ChatMessage[] = [];
  for (const [i, raw] of input.entries()) {
    if (!isObj(raw)) return errors.invalid('input', 'Input should be a valid dictionary');
    const item = raw as Item;
    const type = item.type ?? 'message';
    if (type === 'function_call') {
      if (typeof item.name !== 'string' || typeof item.call_id !== 'string') return errors.invalid('input', 'Field required');
      const call = { id: item.call_id, type: 'function', function: { name: item.name, arguments: typeof item.arguments === 'string' ? item.arguments : '' } };
      const prev = out[out.length - 1];
      // An assistant message followed by its tool call is one chat message.
      if (prev && prev.role === 'assistant' && !prev.tool_calls) prev.tool_calls = [call];
      else out.push({ role: 'assistant', content: null, tool_calls: [call] });
    } else if (type === 'function_call_output') {
      // call_id is required (FunctionCallOutput): vLLM's request validation rejects an output without one.
      if (typeof item.call_id !== 'string') return validationError('missing', ['body', 'input', i, 'call_id'], 'Field required', item);
      out.push({ role: 'tool', tool_call_id: item.call_id, content: typeof item.output === 'string' ? item.output : JSON.stringify(item.output ?? '') });
    } else if (type === 'reasoning') {
      // Reasoning items are not rendered back into the prompt here.
    } else if (type === 'message') {
      if (item.role === undefined) return validationError('missing', ['body', 'input', i, 'role'], 'Field required', item);
      if (typeof item.role !== 'string' || !MESSAGE_ROLES.includes(item.role)) {
        return validationError('literal_error', ['body', 'input', i, 'role'], "Input should be 'user', 'assistant', 'system' or 'developer'", item.role);
      }
      const content = item.content;
      if (content !== undefined && content !== null && typeof content !== 'string' && !Array.isArray(content)) {
        return errors.invalid('input', 'Input should be a valid string');
      }
      out.push({ role: item.role, content: content as ChatMessage['content'] });
    } else {
      return errors.invalid('input', `Unsupported input item type ${JSON.stringify(type)}`);
    }
  }
  return out;
}

/** Responses API tools ({type, name, parameters}) → chat tools ({type, function: {...}}), as vLLM renders them. */
export function chatToolsOf(tools: unknown[]): unknown[] {
  return tools.filter((t) => isObj(t) && t.type === 'function').map((t) => {
    const { type: _type, ...fn } = t as Item;
    return { type: 'function', function: fn };
  });
}

function chatToolChoice(choice: unknown): unknown {
  if (isObj(choice) && choice.type === 'function') return { type: 'function', function: { name: choice.name } };
  return choice;
}

export function parseResponses(body: unknown, cfg: SimConfig, store: ResponseStore, storeEnabled: boolean): GenRequest | HttpError {
  if (!isObj(body)) return errors.invalid('', 'Input should be a valid dictionary');
  if (body.input === undefined || body.input === null) return errors.missing('input');
  const c = common(body, cfg);
  if ('status' in c) return c;
  if (body.instructions !== undefined && body.instructions !== null && typeof body.instructions !== 'string') {
    return errors.invalid('instructions', 'Input should be a valid string');
  }
  const prevId = body.previous_response_id;
  if (prevId !== undefined && prevId !== null && typeof prevId !== 'string') return errors.invalid('previous_response_id', 'Input should be a valid string');
  const tools = body.tools === undefined || body.tools === null ? [] : body.tools;
  if (!Array.isArray(tools)) return errors.invalid('tools', 'Input should be a valid list');
  for (const t of tools) if (!isObj(t) || (t.type === 'function' && typeof t.name !== 'string')) return errors.invalid('tools', 'Field required');
  const m = maxTokensField(body, 'max_output_tokens');
  if (typeof m === 'object') return m;

  // Looked up before anything else is built, as vLLM does: an unknown id is a 404 whatever the rest.
  const prev = typeof prevId === 'string' ? store.get(prevId) : undefined;
  if (typeof prevId === 'string' && prev === undefined) return errors.responseNotFound(prevId);

  const input = inputMessages(body.input);
  if (!Array.isArray(input)) return input;
  const instructions = typeof body.instructions === 'string' && body.instructions !== '' ? body.instructions : null;
  const messages: ChatMessage[] = [];
  if (instructions !== null) messages.push({ role: 'system', content: instructions });
  if (prev !== undefined) {
    for (const msg of prev.messages) if (msg.role !== 'system') messages.push(msg);
    if (prev.outputText !== '') messages.push({ role: 'assistant', content: prev.outputText });
  }
  messages.push(...input);

  const chatTools = chatToolsOf(tools);
  const t = pickTool({ tools: chatTools, tool_choice: chatToolChoice(body.tool_choice ?? undefined) }, messages);
  if ('status' in t) return t;
  const prompt = renderChat(messages, chatTools.length > 0 ? chatTools : null);
  const maxTokens = checkLength(cfg, prompt, m);
  if (typeof maxTokens === 'object') return maxTokens;
  return {
    kind: 'responses',
    stream: c.stream,
    includeUsage: true,
    cacheSalt: c.cacheSalt,
    prompt,
    maxTokens,
    tool: t.tool,
    toolParser: t.parser,
    toolNamed: !!t.named,
    responses: {
      id: `resp_${randomHex(16)}`,
      instructions,
      tools,
      toolChoice: body.tool_choice ?? 'auto',
      previousResponseId: typeof prevId === 'string' ? prevId : null,
      // vLLM's default is true; without VLLM_ENABLE_RESPONSES_API_STORE it is silently ignored.
      store: storeEnabled && body.store !== false,
      maxOutputTokens: m ?? null,
      messages,
    },
  };
}
