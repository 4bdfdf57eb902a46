// The conversations of the Messages benchmark, each sent through the gateway with an official SDK:
// Anthropic's for /v1/messages, OpenAI's for /v1/chat/completions. Both stream every turn and send
// the history back verbatim, so turn n's prompt is a prefix of turn n+1's on either API; a keyed
// conversation names its call in `x-session-id`, a keyless one sends nothing but the conversation.
// And the injected failures: a stream the cut proxy kills mid-way, and how the SDK ended it.

import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import type { SessionPlan, Workload } from '../voice/workload.js';
import { CUT_AFTER_HEADER, CUT_ID_HEADER } from './cut-proxy.js';

export const APIS = ['messages', 'chat'] as const;
export type Api = (typeof APIS)[number];

export interface TurnResult {
  /** Request sent → first content delta, at the client (ms). */
  ttftMs: number;
  /** x-warmroute-route of the answer. */
  route: string;
  replica: string;
}

export interface Target {
  /** The gateway's base URL (no /v1). */
  url: string;
  model: string;
  maxTokens: number;
}

/** What a reply came back as, and the text that goes into the history. */
interface Reply { text: string; route: string; replica: string; ttftMs: number; complete: boolean }

type Msg = { role: 'user' | 'assistant'; content: string };

const TIMEOUT_MS = 180_000;

function anthropic(t: Target, headers: Record<string, string>): Anthropic {
  return new Anthropic({ baseURL: t.url, apiKey: 'unused', maxRetries: 0, timeout: TIMEOUT_MS, defaultHeaders: headers });
}

function openai(t: Target, headers: Record<string, string>): OpenAI {
  return new OpenAI({ baseURL: `${t.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: TIMEOUT_MS, defaultHeaders: headers });
}

/** One streamed turn with Anthropic's SDK; `complete`: message_stop came. Throws what the SDK raises. */
async function messagesTurn(c: Anthropic, t: Target, system: string, history: readonly Msg[], headers: Record<string, string> = {}): Promise<Reply> {
  const t0 = performance.now();
  let first = 0;
  let complete = false;
  const stream = c.messages.stream({ model: t.model, max_tokens: t.maxTokens, temperature: 0, system, messages: [...history] }, { headers });
  stream.on('streamEvent', (e) => {
    if (e.type === 'content_block_delta' && first === 0) first = performance.now();
    if (e.type === 'message_stop') complete = true;
  });
  const { response } = await stream.withResponse();
  const final = await stream.finalMessage();
  const text = final.content.map((b) => (b.type === 'text' ? b.text : '')).join('');
  return { text, complete, ttftMs: (first || performance.now()) - t0, route: response.headers.get('x-warmroute-route') ?? '', replica: response.headers.get('x-warmroute-replica') ?? '' };
}

/** One streamed turn with OpenAI's SDK; `complete`: a finish_reason came. Throws what the SDK raises. */
async function chatTurn(c: OpenAI, t: Target, system: string, history: readonly Msg[], headers: Record<string, string> = {}): Promise<Reply> {
  const t0 = performance.now();
  let first = 0;
  let complete = false;
  let text = '';
  const { data: stream, response } = await c.chat.completions.create({
    model: t.model, max_tokens: t.maxTokens, temperature: 0, stream: true, stream_options: { include_usage: true },
    messages: [{ role: 'system', content: system }, ...history],
  }, { headers }).withResponse();
  for await (const chunk of stream) {
    const choice = chunk.choices[0];
    if (choice?.delta?.content) {
      if (first === 0) first = performance.now();
      text += choice.delta.content;
    }
    if (choice?.finish_reason) complete = true;
  }
  return { text, complete, ttftMs: (first || performance.now()) - t0, route: response.headers.get('x-warmroute-route') ?? '', replica: response.headers.get('x-warmroute-replica') ?? '' };
}

/** A client of one API with `headers` on every request: a turn of it, given the system prompt and the history. */
type Turn = (system: string, history: readonly Msg[], headers?: Record<string, string>) => Promise<Reply>;

function clientOf(api: Api, t: Target, headers: Record<string, string>): Turn {
  if (api === 'messages') {
    const c = anthropic(t, headers);
    return (system, history, more) => messagesTurn(c, t, system, history, more);
  }
  const c = openai(t, headers);
  return (system, history, more) => chatTurn(c, t, system, history, more);
}

/** A caller's session over one API: its turns in order, each after the one before it answered. */
async function session(api: Api, t: Target, w: Workload, s: SessionPlan, keyed: boolean): Promise<TurnResult[]> {
  // The workload's session ids carry its seed: each round's keys are its own.
  const turn = clientOf(api, t, keyed ? { 'x-session-id': `${s.id}-${api}` } : {});
  const system = w.groups[s.group].system;
  await new Promise((r) => setTimeout(r, s.startMs));
  const history: Msg[] = [];
  const out: TurnResult[] = [];
  for (const plan of s.turns) {
    history.push({ role: 'user', content: plan.user });
    const r = await turn(system, history);
    if (!r.complete) throw new Error(`${api} session ${s.id}: a turn ended without its stream's end, and the SDK did not raise`);
    // An empty answer still goes back (as vLLM would render it): the next turn's prompt stays a prefix.
    history.push({ role: 'assistant', content: r.text === '' ? '.' : r.text });
    out.push({ ttftMs: r.ttftMs, route: r.route, replica: r.replica });
    await new Promise((res) => setTimeout(res, plan.thinkMs));
  }
  return out;
}

/** Every session of the workload at once (each starting at its own time), over one API. */
export async function runArm(api: Api, t: Target, w: Workload, keyed: boolean): Promise<TurnResult[]> {
  return (await Promise.all(w.sessions.map((s) => session(api, t, w, s, keyed)))).flat();
}

/** How an injected failure ended at the client. */
export interface Injection {
  /** The SDK raised its APIError (the gateway's error event). */
  raisedApiError: number;
  /** The SDK raised something else (a connection error, say): still not silent. */
  raisedOther: number;
  /** The answer came back whole though its stream was cut (the gateway recovered it). */
  recovered: number;
  /** The SDK returned as if the answer were whole, though its stream was cut and never ended: a silent end. */
  silent: number;
  /** Requests whose stream ended before the cut point (nothing injected; sent again). */
  missed: number;
  /** The error type the SDK saw in each APIError (api_error, …), counted. */
  errorTypes: Record<string, number>;
}

/**
 * `count` failures injected into one API's streams, one request at a time: each asks the cut
 * proxy to kill its stream after 1–4 SSE events (a replica dying before, at or after the first
 * content delta). A request whose stream was too short to cut is sent again, up to 3 × count in all.
 */
export async function inject(api: Api, t: Target, w: Workload, count: number, wasCut: (id: string) => boolean): Promise<Injection> {
  const out: Injection = { raisedApiError: 0, raisedOther: 0, recovered: 0, silent: 0, missed: 0, errorTypes: {} };
  let injected = 0;
  const turn = clientOf(api, t, {});
  for (let i = 0; injected < count && i < 3 * count; i++) {
    const id = `${api}-cut-${i}`;
    const g = w.groups[i % w.groups.length];
    const headers = { 'x-session-id': id, [CUT_AFTER_HEADER]: String(1 + (i % 4)), [CUT_ID_HEADER]: id };
    const history: Msg[] = [{ role: 'user', content: w.sessions[i % w.sessions.length].turns[0].user }];
    let reply: Reply | null = null;
    let error: unknown = null;
    try {
      reply = await turn(g.system, history, headers);
    } catch (e) {
      error = e;
    }
    if (!wasCut(id)) {
      out.missed++;
      if (error !== null) throw new Error(`${api}: a request the proxy did not cut failed: ${String(error)}`);
      continue;
    }
    injected++;
    const apiError = api === 'messages' ? error instanceof Anthropic.APIError : error instanceof OpenAI.APIError;
    if (apiError) {
      out.raisedApiError++;
      const type = (error as { error?: { error?: { type?: string }; type?: string } }).error;
      const name = type?.error?.type ?? type?.type ?? 'unknown';
      out.errorTypes[name] = (out.errorTypes[name] ?? 0) + 1;
    } else if (error !== null) out.raisedOther++;
    else if (reply?.complete) out.recovered++;
    else out.silent++;
  }
  if (injected < count) throw new Error(`${api}: only ${injected} of ${count} failures injected (${out.missed} streams ended before their cut point): raise --max-tokens`);
  return out;
}
