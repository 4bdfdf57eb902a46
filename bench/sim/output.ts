// What a replica "generates": a deterministic token plan per request (seed + prompt), with the
// chunk each token streams. Text answers end with the end-of-turn token (Gemma's chat EOS), so
// finish_reason "stop" carries an empty delta as on vLLM; tool calls follow the gemma4 parser's
// streaming (name first, then argument fragments, closing characters held to the end marker).

import { createRng } from './hash.js';
import { CHARS_PER_TOKEN, SPECIAL, pieceId, pushText } from './tokenizer.js';

// Every piece is exactly one token wide, so the answer re-tokenizes to the generated ids.
const PIECES = [
  ' the', ' and', ' you', ' can', ' for', ' are', ' not', ' our', ' how', ' now', ' day', ' see',
  ' way', ' new', ' one', ' all', ' get', ' use', 'ally', 'ment', 'tion', ' to ', ' is ', ' of ',
  ' it ', ' in ', ' we ', ' be ', ' do ', ' on ', ' at ', ' so ', ' up ', ' my ', ' me ', ' go ',
  ' if ', ' no ', ' or ', ' as ', ' by ', 'here', 'that', 'this', 'have', 'will', 'with', 'just',
  'time', 'good', 'what', 'when', 'well', 'help', 'Sure', 'Okay', ', I ', '. Th', 'ere.', 'ing ',
];
const WORDS = ['Paris', 'tomorrow', 'Alice', 'table for two', 'celsius', '7pm', 'confirmed'];

export type TokenDelta =
  | { t: 'text'; text: string }
  | { t: 'none' }
  | { t: 'tool-name'; id: string; name: string }
  | { t: 'tool-args'; args: string };

export interface OutputPlan {
  ids: number[];
  deltas: TokenDelta[];
  /** finish_reason when the plan runs to its end (EOS). */
  finish: 'stop' | 'tool_calls';
  tool?: { id: string; name: string; arguments: string };
}

export interface ToolSpec {
  name: string;
  parameters?: { properties?: Record<string, { type?: string; enum?: unknown[] }> };
}

/** json.dumps() formatting (", " and ": " separators), as vLLM's parsers produce arguments. */
export function pyJson(v: unknown): string {
  if (v === null || v === undefined) return 'null';
  if (Array.isArray(v)) return `[${v.map(pyJson).join(', ')}]`;
  if (typeof v === 'object') {
    const entries = Object.entries(v as Record<string, unknown>).map(([k, x]) => `${JSON.stringify(k)}: ${pyJson(x)}`);
    return `{${entries.join(', ')}}`;
  }
  return JSON.stringify(v);
}

function argsFor(tool: ToolSpec, rnd: () => number): string {
  const args: Record<string, unknown> = {};
  for (const [key, schema] of Object.entries(tool.parameters?.properties ?? {})) {
    if (schema?.enum && schema.enum.length > 0) args[key] = schema.enum[0];
    else if (schema?.type === 'number' || schema?.type === 'integer') args[key] = 1 + Math.floor(rnd() * 9);
    else if (schema?.type === 'boolean') args[key] = true;
    else if (schema?.type === 'array') args[key] = [];
    else if (schema?.type === 'object') args[key] = {};
    else args[key] = WORDS[Math.floor(rnd() * WORDS.length)];
  }
  return pyJson(args);
}

function hex(rnd: () => number, n: number): string {
  let s = '';
  for (let i = 0; i < n; i++) s += Math.floor(rnd() * 16).toString(16);
  return s;
}

export function promptDigest(tokens: number[]): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < tokens.length; i++) h = Math.imul(h ^ tokens[i], 0x01000193);
  return h >>> 0;
}

export interface PlanInput {
  seed: number;
  prompt: number[];
  length: { min: number; max: number };
  eosId?: number;
  tool?: ToolSpec;
}

export function planOutput(input: PlanInput): OutputPlan {
  const rnd = createRng((input.seed * 0x9e3779b1) ^ promptDigest(input.prompt));
  const eos = input.eosId ?? SPECIAL.endOfTurn;
  if (input.tool) return planToolCall(input.tool, rnd, eos);
  const n = input.length.min + Math.floor(rnd() * (input.length.max - input.length.min + 1));
  const ids: number[] = [];
  const deltas: TokenDelta[] = [];
  for (let i = 0; i < n - 1; i++) {
    const piece = PIECES[Math.floor(rnd() * PIECES.length)];
    ids.push(pieceId(piece));
    deltas.push({ t: 'text', text: piece });
  }
  ids.push(eos);
  deltas.push({ t: 'text', text: '' });
  return { ids, deltas, finish: 'stop' };
}

function planToolCall(tool: ToolSpec, rnd: () => number, eos: number): OutputPlan {
  const id = `chatcmpl-tool-${hex(rnd, 32)}`;
  const args = argsFor(tool, rnd);
  const ids: number[] = [SPECIAL.toolCallStart];
  const deltas: TokenDelta[] = [{ t: 'none' }];
  const header: number[] = [];
  pushText(header, `call:${tool.name}{`);
  header.forEach((h, i) => {
    ids.push(h);
    // The parser can name the function only once the "{" has arrived.
    deltas.push(i === header.length - 1 ? { t: 'tool-name', id, name: tool.name } : { t: 'none' });
  });
  const held = args.length >= 2 ? 2 : args.length;
  const body = args.slice(0, args.length - held);
  for (let i = 0; i < body.length; i += CHARS_PER_TOKEN) {
    const frag = body.slice(i, i + CHARS_PER_TOKEN);
    ids.push(pieceId(frag));
    deltas.push({ t: 'tool-args', args: frag });
  }
  ids.push(SPECIAL.toolCallEnd);
  deltas.push(held > 0 ? { t: 'tool-args', args: args.slice(args.length - held) } : { t: 'none' });
  ids.push(eos);
  deltas.push({ t: 'none' });
  return { ids, deltas, finish: 'tool_calls', tool: { id, name: tool.name, arguments: args } };
}
