// Deterministic approximate tokenizer and a Gemma-style chat template.
//
// Text is cut into 4-character pieces (≈4 chars/token, like real BPE on English); special markers
// are single tokens and split the text around them, as special tokens split BPE merges. Each text
// segment is sliced on its own, so a byte-stable system prompt plus a growing history yields a
// stable token prefix, a changed byte changes the tokens from that point on, and an assistant
// answer sent back verbatim re-tokenizes to exactly the tokens the replica generated (which is
// what lets the next turn hit the cache through the previous answer, as on real vLLM).

import { fnv1a } from './hash.js';

export const SPECIAL = Object.freeze({
  eos: 1,
  bos: 2,
  toolCallStart: 48,
  toolCallEnd: 49,
  startOfTurn: 105,
  endOfTurn: 106,
});

export const CHARS_PER_TOKEN = 4;

export function pieceId(piece: string): number {
  // Keep text ids clear of the special-token range.
  return 1000 + (fnv1a(piece) % 0x7fff0000);
}

export function pushText(out: number[], text: string): void {
  for (let i = 0; i < text.length; i += CHARS_PER_TOKEN) out.push(pieceId(text.slice(i, i + CHARS_PER_TOKEN)));
}

export interface ToolCallMsg {
  id?: string;
  type?: string;
  function: { name: string; arguments?: string };
}

export type ContentPart = { type: string; text?: string };

export interface ChatMessage {
  role: string;
  content?: string | ContentPart[] | null;
  tool_calls?: ToolCallMsg[];
  tool_call_id?: string;
  name?: string;
}

/** vLLM's "string" content format joins text parts with a newline. */
export function contentText(content: ChatMessage['content']): string {
  if (content == null) return '';
  if (typeof content === 'string') return content;
  return content
    .filter((p) => p && typeof p.text === 'string')
    .map((p) => p.text as string)
    .join('\n');
}

function turn(out: number[], role: string, render: () => void): void {
  out.push(SPECIAL.startOfTurn);
  pushText(out, `${role}\n`);
  render();
  out.push(SPECIAL.endOfTurn);
  pushText(out, '\n');
}

/** Tools first, then one turn per message, then the generation prompt. */
export function renderChat(messages: ChatMessage[], tools?: unknown[] | null, opts: { continueFinal?: boolean } = {}): number[] {
  const out: number[] = [SPECIAL.bos];
  if (tools && tools.length > 0) turn(out, 'tools', () => pushText(out, JSON.stringify(tools)));
  for (const [i, m] of messages.entries()) {
    const role = m.role === 'assistant' ? 'model' : m.role;
    // continue_final_message: the last message is left open for the model to go on writing it
    // (no end of turn, no generation prompt), as vLLM's chat template does.
    if (opts.continueFinal && i === messages.length - 1) {
      out.push(SPECIAL.startOfTurn);
      pushText(out, `${role}\n${contentText(m.content)}`);
      return out;
    }
    turn(out, role, () => {
      pushText(out, contentText(m.content));
      for (const tc of m.tool_calls ?? []) {
        out.push(SPECIAL.toolCallStart);
        pushText(out, `call:${tc.function?.name ?? ''}${tc.function?.arguments ?? ''}`);
        out.push(SPECIAL.toolCallEnd);
      }
    });
  }
  out.push(SPECIAL.startOfTurn);
  pushText(out, 'model\n');
  return out;
}

/** /v1/completions: BOS + text pieces (vLLM adds special tokens there), or token ids as given. */
export function tokenizePrompt(prompt: string | number[]): number[] {
  if (Array.isArray(prompt)) return prompt.slice();
  const out: number[] = [SPECIAL.bos];
  pushText(out, prompt);
  return out;
}
