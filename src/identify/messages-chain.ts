import { writeByte, writeField } from './canonical.js';
import { asRecord, linkChain, NO_CHAIN, writeSeedHead, type Chain, type ChainOptions } from './chain.js';

const KIND_MESSAGES = 0x4d; // M

/**
 * Claude Code opens its system prompt with an attribution block that carries a per-request hash;
 * vLLM drops it before rendering (it would defeat its own prefix cache), and so does the chain, or
 * no two requests of one conversation would share a prefix.
 */
const BILLING_HEADER = 'x-anthropic-billing-header';

/**
 * The system prompt as vLLM renders it: a string, or the text of its text blocks joined. Block
 * fields such as `cache_control` are no part of the prompt and are not hashed.
 */
function writeSystem(system: unknown): void {
  if (typeof system === 'string') {
    if (system !== '') writeField(3, system);
    return;
  }
  if (!Array.isArray(system)) {
    writeField(3, system);
    return;
  }
  let text = '';
  for (const b of system) {
    const block = asRecord(b);
    if (block === null || block.type !== 'text' || typeof block.text !== 'string') continue;
    if (block.text.startsWith(BILLING_HEADER)) continue;
    text += block.text;
  }
  if (text !== '') writeField(3, text);
}

/**
 * Tools as the template sees them: name, description and input schema. `cache_control` (and any
 * other hint to Anthropic's own service) is not rendered, so not hashed.
 */
function writeTools(tools: unknown): void {
  if (!Array.isArray(tools)) {
    writeField(5, tools);
    return;
  }
  writeByte(5);
  for (const t of tools) {
    const tool = asRecord(t);
    if (tool === null) { writeField(1, t); continue; }
    writeByte(0x2c);
    writeField(1, tool.name);
    writeField(2, tool.description);
    writeField(3, tool.input_schema);
  }
}

/**
 * One content block, by the fields that reach the prompt. A text block is written as its text
 * alone, so a message whose content is a string and one whose content is that string in a single
 * text block hash the same (vLLM renders them the same). `cache_control`, `citations` and a thinking
 * block's `signature` (vLLM makes one up per answer) are not hashed.
 */
function writeBlock(b: unknown): void {
  if (typeof b === 'string') { writeField(2, b); return; }
  const block = asRecord(b);
  if (block === null) { writeField(1, b); return; }
  if (block.type === 'text') { writeField(2, block.text); return; }
  writeByte(0x2c);
  writeField(1, block.type);
  writeField(3, block.id);
  writeField(4, block.name);
  writeField(5, block.input);
  writeField(6, block.tool_use_id);
  if (block.content !== undefined) { writeByte(7); writeContent(block.content); }
  writeField(8, block.is_error);
  writeField(9, block.thinking);
  writeField(10, block.source);
  writeField(11, block.data);
}

function writeContent(content: unknown): void {
  if (Array.isArray(content)) for (const b of content) writeBlock(b);
  else writeBlock(content);
}

/** A user message that says something: not only tool results sent back (those are the agent's, not a new utterance). */
function speaks(content: unknown): boolean {
  if (!Array.isArray(content)) return typeof content === 'string';
  for (const b of content) {
    const block = asRecord(b);
    if (typeof b === 'string' || (block !== null && block.type !== 'tool_result')) return true;
  }
  return false;
}

/**
 * Anthropic Messages: one link per message over its role and content blocks, chained like chat
 * messages; the seed is model, cache_salt and what vLLM renders before the messages (the system
 * prompt, the tools, the template's kwargs, the output format). `metadata`, `cache_control`,
 * `tool_choice` and the sampling fields change no prompt token and no hash.
 */
export function messagesChain(body: Record<string, unknown>, opts: ChainOptions): Chain {
  const messages = body.messages;
  if (!Array.isArray(messages) || messages.length === 0) return NO_CHAIN;
  const headBytes = writeSeedHead(KIND_MESSAGES, body);
  writeSystem(body.system);
  writeField(4, body.chat_template_kwargs);
  if (body.tools !== undefined) writeTools(body.tools);
  writeField(7, asRecord(body.output_config)?.format);
  return linkChain(messages, headBytes, opts, (m) => {
    const msg = asRecord(m);
    if (msg === null) {
      writeField(1, m);
      return false;
    }
    writeField(1, msg.role);
    writeByte(3);
    writeContent(msg.content);
    return msg.role === 'user' && speaks(msg.content);
  });
}
