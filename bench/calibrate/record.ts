// Records one workload through one router on a fleet: every request's send time, the replica that
// served it (warmroute's x-warmroute-replica), its prompt and output token ids (vLLM's
// `return_token_ids`), cached tokens and timings, and the replicas' prefix-cache counters around
// the run. Each run's prompts carry a salt of their own, so a run never starts from what an
// earlier one left in the caches (a real vLLM cannot be emptied outside its dev mode).

import { Agent } from 'node:http';
import { call } from '../lib/http.js';
import { sumSamples } from '../lib/prom.js';
import { streamExchange, type EventReader, type Exchange } from '../voice/client.js';
import { captureKvEvents } from './kv-capture.js';
import type { ReplicaCounters, Trace, TraceRequest } from './trace.js';
import { mulberry32 } from '../../src/prng.js';
import { planSessions, planShared, TINY_LLAMA_VOCAB, type SessionsWorkload, type SharedPrefixWorkload, type Workload } from './workloads.js';

export interface RecordTarget {
  /** Where requests are sent (the router). */
  url: string;
  /** Each replica's KV-events publisher, fleet order, when they publish. */
  kvEvents?: readonly { endpoint: string; topic?: string }[];
  /** The replicas, fleet order; their /metrics and /detokenize are read directly. */
  replicas: string[];
  model: string;
  /** x-warmroute-replica value → fleet index. */
  replicaIndex(name: string | null): number;
}

interface TokenExchange extends Exchange {
  promptIds: number[];
  outputIds: number[];
}

type Chunk = {
  prompt_token_ids?: number[] | null;
  choices?: { text?: string; delta?: { content?: string | null }; token_ids?: number[] | null; prompt_token_ids?: number[] | null; finish_reason?: string | null }[];
  usage?: { prompt_tokens: number; completion_tokens: number; prompt_tokens_details?: { cached_tokens?: number } | null } | null;
  error?: { message?: string };
};

/** Reads completions and chat chunks alike, with the token ids `return_token_ids` adds. */
const readTokens: EventReader = (data, o) => {
  const out = o as TokenExchange;
  // streamExchange makes the exchange; the token lists are this reader's own fields.
  out.promptIds ??= [];
  out.outputIds ??= [];
  if (data === '[DONE]') {
    out.done = true;
    return;
  }
  const c = JSON.parse(data) as Chunk;
  if (c.error) out.error = c.error.message ?? 'error event';
  if (c.usage) {
    out.promptTokens = c.usage.prompt_tokens;
    out.completionTokens = c.usage.completion_tokens;
    out.cachedTokens = c.usage.prompt_tokens_details?.cached_tokens ?? null;
  }
  if (c.prompt_token_ids) out.promptIds = c.prompt_token_ids;
  const ch = c.choices?.[0];
  if (!ch) return;
  if (ch.prompt_token_ids) out.promptIds = ch.prompt_token_ids;
  const text = ch.text ?? ch.delta?.content ?? '';
  if (ch.token_ids && ch.token_ids.length > 0) {
    if (out.ttftMs === null) out.ttftMs = performance.now() - out.sentAt;
    out.outputIds.push(...ch.token_ids);
  }
  out.content += text;
  if (ch.finish_reason) out.finishReason = ch.finish_reason;
};

async function counters(replicas: readonly string[]): Promise<ReplicaCounters[]> {
  return Promise.all(replicas.map(async (u) => {
    const t = await (await call(`${u}/metrics`)).text();
    return { queries: sumSamples([t], 'vllm:prefix_cache_queries_total'), hits: sumSamples([t], 'vllm:prefix_cache_hits_total') };
  }));
}

function makeDetokenizer(replica: string, model: string) {
  const memo = new Map<string, string>();
  return async (tokens: number[]): Promise<string> => {
    const key = tokens.join(',');
    const hit = memo.get(key);
    if (hit !== undefined) return hit;
    const r = (await (await call(`${replica}/detokenize`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model, tokens }) })).json()) as { prompt: string };
    memo.set(key, r.prompt);
    return r.prompt;
  };
}

/**
 * Text of about `target` tokens from `ids`: random ids re-tokenize to more tokens than they were
 * (BPE merges them differently), so the ids are cut by the ratio measured on the replica.
 */
async function fitText(replica: string, model: string, text: (ids: number[]) => Promise<string>, ids: number[], target: number): Promise<string> {
  const first = await text(ids);
  const r = (await (await call(`${replica}/tokenize`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model, prompt: first }) })).json()) as { count: number };
  if (r.count <= target) return first;
  return text(ids.slice(0, Math.max(1, Math.round((ids.length * target) / r.count))));
}

const sleepUntil = (t0: number, atMs: number) => new Promise((r) => setTimeout(r, Math.max(0, t0 + atMs - performance.now())));

function toRecord(x: TokenExchange, atMs: number, group: string, target: RecordTarget): TraceRequest {
  const served = x.error === null && x.status === 200;
  return {
    atMs, replica: served ? target.replicaIndex(x.replica) : -1, route: x.route, group,
    promptIds: x.promptIds ?? [], outputIds: x.outputIds ?? [], cachedTokens: served ? x.cachedTokens : null,
    ttftMs: x.ttftMs, totalMs: x.totalMs, error: x.error ?? (x.status === 200 ? null : `HTTP ${x.status}`),
  };
}

function send(target: RecordTarget, agent: Agent, path: string, headers: Record<string, string>, body: Record<string, unknown>): Promise<TokenExchange> {
  const full = { ...body, model: target.model, stream: true, stream_options: { include_usage: true }, ignore_eos: true, return_token_ids: true };
  return streamExchange(target.url, path, headers, full, agent, 120_000, readTokens) as Promise<TokenExchange>;
}

/** `salt`: token ids put before every system prompt, different per run. */
async function recordShared(w: SharedPrefixWorkload, target: RecordTarget, salt: number[], agent: Agent): Promise<TraceRequest[]> {
  const plan = planShared(w);
  const text = makeDetokenizer(target.replicas[0], target.model);
  const fit = (ids: number[], n: number) => fitText(target.replicas[0], target.model, text, ids, n);
  const system = await Promise.all(plan.system.map((s) => fit([...salt, ...s], w.systemTokens)));
  const questions = await Promise.all(plan.questions.map((g) => Promise.all(g.map((q) => fit(q, w.questionTokens)))));
  const out: TraceRequest[] = [];
  const t0 = performance.now();
  await Promise.all(plan.requests.map(async (p) => {
    await sleepUntil(t0, p.atMs);
    const x = await send(target, agent, '/v1/completions', {}, { prompt: `${system[p.group]} ${questions[p.group][p.user]}`, max_tokens: w.outputTokens });
    out.push(toRecord(x, x.sentAt - t0, `g${p.group}`, target));
  }));
  return out;
}

async function recordSessions(w: SessionsWorkload, target: RecordTarget, salt: number[], agent: Agent): Promise<TraceRequest[]> {
  const plan = planSessions(w);
  const text = makeDetokenizer(target.replicas[0], target.model);
  const fit = (ids: number[], n: number) => fitText(target.replicas[0], target.model, text, ids, n);
  const system = await Promise.all(plan.system.map((s) => fit([...salt, ...s], w.systemTokens)));
  const users = await Promise.all(plan.sessions.map((s) => Promise.all(s.users.map((u) => fit(u, w.userTokens)))));
  const out: TraceRequest[] = [];
  const t0 = performance.now();
  const runId = salt.join('.');
  await Promise.all(plan.sessions.map(async (s, si) => {
    await sleepUntil(t0, s.startMs);
    const messages: { role: string; content: string }[] = [{ role: 'system', content: system[s.agent] }];
    for (let t = 0; t < s.users.length; t++) {
      messages.push({ role: 'user', content: users[si][t] });
      const sessionKey = `cal-${runId}-${si}`;
      const x = await send(target, agent, '/v1/chat/completions', { 'x-session-id': sessionKey }, { messages, max_tokens: w.outputTokens });
      out.push({ ...toRecord(x, x.sentAt - t0, `s${si}`, target), sessionKey, messages: messages.map((m) => ({ ...m })) });
      if (x.error !== null || x.status !== 200) return;
      messages.push({ role: 'assistant', content: x.content });
      await new Promise((r) => setTimeout(r, s.thinkMs[t]));
    }
  }));
  return out;
}

export interface RecordOptions {
  workloadName: string;
  workload: Workload;
  strategy: string;
  engine: Trace['engine'];
  /** Seeds this run's salt. */
  run: number;
}

export async function recordRun(target: RecordTarget, o: RecordOptions): Promise<Trace> {
  const rand = mulberry32(0x5a17 + o.run * 7919 + o.strategy.length * 104729);
  const salt = Array.from({ length: 8 }, () => TINY_LLAMA_VOCAB.first + Math.floor(rand() * (TINY_LLAMA_VOCAB.end - TINY_LLAMA_VOCAB.first)));
  const agent = new Agent({ keepAlive: true, maxSockets: 256 });
  const before = await counters(target.replicas);
  const when = new Date().toISOString();
  const kv = target.kvEvents ? await captureKvEvents(target.kvEvents) : null;
  try {
    const requests = o.workload.kind === 'shared-prefix'
      ? await recordShared(o.workload, target, salt, agent)
      : await recordSessions(o.workload, target, salt, agent);
    requests.sort((a, b) => a.atMs - b.atMs);
    const after = await counters(target.replicas);
    const events = kv ? await kv.stop() : null;
    return {
      kind: 'warmroute-trace', workload: o.workloadName, strategy: o.strategy, when, engine: o.engine,
      replicas: target.replicas,
      counters: after.map((a, i) => ({ queries: a.queries - before[i].queries, hits: a.hits - before[i].hits })),
      ...(events ? { kvEvents: events.map((e) => ({ stored: e.stored, removed: e.removed })) } : {}),
      requests,
    };
  } finally {
    agent.destroy();
  }
}
