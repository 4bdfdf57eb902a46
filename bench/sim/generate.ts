// Serve one validated generation request: frontend delay, engine submission, then the stream
// (or the final body) as tokens come out of engine steps. A client that goes away aborts the
// sequence at once, freeing its seat and blocks, and the abort is recorded with its time.

import type { ServerResponse } from 'node:http';
import { chatChunks, chatCompletionBody, completionBody, completionChunks, deltaJson, SSE_DONE, type Usage } from './chunks.js';
import type { SimConfig } from './config.js';
import type { Engine } from './engine.js';
import type { FaultState } from './faults.js';
import { randomHex } from './hash.js';
import { createMessagesOutput, type MessagesOutput } from './messages-chunks.js';
import { planOutput } from './output.js';
import type { LoraState } from './lora.js';
import { loraRoot } from './lora.js';
import type { GenRequest } from './request.js';
import { createResponsesOutput, responseObject, type ResponsesOutput } from './response-chunks.js';
import type { ResponseStore } from './response-store.js';
import { createSeq, NO_SALT_ROOT, saltRoot, type Seq, type SeqStatus } from './sequence.js';
import { frontendMs } from './timing.js';
import { SPECIAL } from './tokenizer.js';
import type { SimTracer, TracedRequest } from './tracing.js';

export interface AbortRecord {
  id: string;
  /** Date.now() when the replica noticed the client was gone. */
  at: number;
  /** Where the request was: frontend (before the engine), waiting, or running. */
  phase: SeqStatus;
  generated: number;
}

export interface RequestRecord {
  id: string;
  kind: GenRequest['kind'];
  stream: boolean;
  promptTokens: number;
  cachedTokens: number;
  completionTokens: number;
  finishReason: string | null;
  /** HTTP arrival → first token sampled, ms (what a client sees as TTFT, minus the wire). */
  ttftMs: number | null;
  status: 'ok' | 'aborted' | 'died' | 'stalled';
}

export interface SimCounters {
  requests: number;
  finished: number;
  aborted: number;
  aborts: AbortRecord[];
  rejected: number;
  stalled: number;
  diedMidStream: number;
}

export interface GenContext {
  cfg: SimConfig;
  engine: Engine;
  faults: FaultState;
  counters: SimCounters;
  /** Requests between HTTP arrival and the engine queue. */
  inFrontend: { n: number };
  /** Bumped by a crash or reset: connections dropped by the replica itself are not client aborts. */
  epoch: { n: number };
  /** Stored Responses API responses (in the API server's memory: a restart empties it). */
  responses: ResponseStore;
  /** --otlp-traces-endpoint: the replica's llm_request spans; null when not traced. */
  tracer: SimTracer | null;
  /** --enable-lora: the adapters and their slots (lora.ts). */
  lora: LoraState;
  record(r: RequestRecord): void;
}

const LOG_ABORTS = 1000;

/** `trace`: the request's trace context headers, for its llm_request span. */
export function serveGeneration(ctx: GenContext, res: ServerResponse, g: GenRequest, arrivalMs: number, trace: TracedRequest['headers'] = {}): void {
  const { cfg, engine } = ctx;
  const epoch = ctx.epoch.n;
  const chat = g.kind === 'chat';
  const ident = {
    // vLLM runs a Messages request as a chat completion, and its message keeps that id.
    id: g.responses?.id ?? (chat || g.kind === 'messages' ? `chatcmpl-${randomHex(16)}` : `cmpl-${randomHex(16)}`),
    created: Math.floor(Date.now() / 1000),
    // vLLM answers with the name asked for: the adapter's, for an adapter request.
    model: g.lora ?? cfg.model,
  };
  const plan = planOutput({
    seed: cfg.seed,
    prompt: g.prompt,
    // ignore_eos: one token past max_tokens, so the answer is cut there, on its length, as vLLM's is.
    length: g.ignoreEos ? { min: g.maxTokens + 1, max: g.maxTokens + 1 } : cfg.outputTokens,
    tool: g.tool,
    eosId: g.kind === 'completion' ? SPECIAL.eos : SPECIAL.endOfTurn,
  });
  // Responses API: the output items and events are built as tokens come, streamed or not.
  const rsp: ResponsesOutput | null = g.responses ? createResponsesOutput(g.responses, ident) : null;
  // Anthropic Messages: the chat completion's chunks as vLLM converts them.
  const msg: MessagesOutput | null = g.kind === 'messages' ? createMessagesOutput(ident) : null;
  const rspStatus = (finish: string) => (finish === 'length' ? 'incomplete' : 'completed');
  const die = g.stream ? ctx.faults.take('die-mid-stream') : undefined;
  const dieAfter = die ? (die.afterChunks ?? 3) : Infinity;
  const stall = g.stream && !die ? ctx.faults.take('stall-mid-stream') : undefined;
  const stallAfter = stall ? (stall.afterChunks ?? 3) : Infinity;
  let chunksSent = 0;
  let settled = false;
  let frontendTimer: NodeJS.Timeout | null = null;
  const texts: string[] = [];
  // A tool call's arguments as generated so far: what a named tool_choice returns when cut on its length.
  let toolArgs = '';
  ctx.counters.requests++;

  const usage = (seq: Seq): Usage => ({
    promptTokens: seq.promptLen,
    completionTokens: seq.generated,
    cachedTokens: cfg.enablePromptTokensDetails ? Math.max(0, seq.cachedTokens) : null,
  });
  const record = (seq: Seq, finish: string | null, status: RequestRecord['status']) =>
    ctx.record({
      id: ident.id,
      kind: g.kind,
      stream: g.stream,
      promptTokens: seq.promptLen,
      cachedTokens: Math.max(0, seq.cachedTokens),
      completionTokens: seq.generated,
      finishReason: finish,
      ttftMs: seq.firstTokenMs ? seq.firstTokenMs - arrivalMs : null,
      status,
    });
  /** The API-level finish_reason of the token at `index`, or null when more follow. */
  const finishOf = (index: number): string | null => {
    if (index + 1 >= plan.ids.length) return plan.finish === 'tool_calls' && g.toolNamed ? 'stop' : plan.finish;
    if (index + 1 >= Math.min(plan.ids.length, g.maxTokens)) return 'length';
    return null;
  };

  const seq = createSeq({
    id: ident.id,
    prompt: g.prompt,
    root: loraRoot(g.cacheSalt === undefined ? NO_SALT_ROOT : saltRoot(g.cacheSalt), g.lora ?? null),
    lora: g.lora ?? null,
    plan,
    maxOut: Math.min(plan.ids.length, g.maxTokens),
    httpArrivalMs: arrivalMs,
    priority: g.priority,
    sink: {
      onToken(s, index) {
        const d = plan.deltas[index];
        if (d.t === 'text') texts.push(d.text);
        else if (d.t === 'tool-args') toolArgs += d.args;
        const events = rsp?.token(d) ?? '';
        if (!g.stream) return;
        const finish = finishOf(index);
        let out = '';
        if (rsp) {
          out += events;
          if (finish !== null) out += rsp.finish(rspStatus(finish), usage(s));
        } else if (msg) {
          out += msg.token(d, index === 0, s.promptLen);
          if (finish !== null) out += msg.finish(finish, usage(s));
        } else if (chat) {
          if (index === 0) out += chatChunks.role(ident);
          out += chatChunks.token(ident, deltaJson(d, g.toolParser), finish) ?? '';
        } else {
          out += completionChunks.token(ident, d.t === 'text' ? d.text : '', finish);
        }
        if (finish !== null && g.includeUsage && !rsp && !msg) {
          out += chat ? chatChunks.usage(ident, usage(s)) : completionChunks.usage(ident, usage(s));
        }
        if (d.t !== 'none') chunksSent++;
        if (chunksSent >= dieAfter && finish === null) {
          settled = true;
          ctx.counters.diedMidStream++;
          engine.abort(s);
          record(s, null, 'died');
          // Let the Nth chunk reach the client, then drop the connection without a terminator.
          res.write(out, () => res.destroy());
          return;
        }
        if (chunksSent >= stallAfter && finish === null) {
          settled = true;
          ctx.counters.stalled++;
          engine.abort(s);
          record(s, null, 'stalled');
          // The Nth chunk goes out, then nothing more: the connection stays open until the client leaves.
          res.write(out);
          return;
        }
        if (out) res.write(out);
      },
      onFinish(s, reason) {
        settled = true;
        ctx.counters.finished++;
        const finish = finishOf(s.generated - 1) ?? reason;
        record(s, finish, 'ok');
        ctx.tracer?.finished(s, { requestId: ident.id, maxTokens: g.maxTokens, headers: trace });
        let body: string;
        if (rsp && g.responses) {
          // Stored when complete, before the last bytes go out: a follow-up sent on receipt finds it.
          body = JSON.stringify(responseObject(g.responses, ident, rspStatus(finish), rsp.items(), usage(s)));
          if (g.responses.store) ctx.responses.put({ id: ident.id, messages: g.responses.messages, outputText: rsp.text(), body });
          if (g.stream) {
            // vLLM's Responses stream ends with response.completed: no [DONE].
            res.end();
            return;
          }
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(body);
          return;
        }
        if (g.stream) {
          // A Messages stream ends with message_stop, sent with the last token.
          res.end(msg ? undefined : SSE_DONE);
          return;
        }
        const text = texts.join('');
        if (msg) {
          if (plan.tool && finish === 'length') {
            // vLLM's converter parses the call's arguments as JSON: cut short, they fail it (a 500).
            res.writeHead(500, { 'content-type': 'application/json' });
            res.end(JSON.stringify({ type: 'error', error: { type: 'internal_error', message: `Unterminated string starting at: line 1 column ${toolArgs.length} (char ${toolArgs.length - 1})` } }));
            return;
          }
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(msg.body(text, plan.tool && reason === 'stop' ? plan.tool : null, finish, usage(s)));
          return;
        }
        if (!chat) body = completionBody(ident, text, finish, usage(s));
        else if (plan.tool && reason === 'stop') body = chatCompletionBody(ident, null, [plan.tool], finish, usage(s));
        // vLLM answers a named tool_choice with the output as the call's arguments, cut or not.
        else if (plan.tool && g.toolNamed && finish === 'length') body = chatCompletionBody(ident, null, [{ ...plan.tool, arguments: toolArgs }], finish, usage(s));
        else body = chatCompletionBody(ident, text, [], finish, usage(s));
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(body);
      },
    },
  });

  res.on('close', () => {
    if (settled) return;
    settled = true;
    const phase = seq.status;
    if (frontendTimer) {
      clearTimeout(frontendTimer);
      ctx.inFrontend.n--;
    }
    engine.abort(seq);
    if (ctx.epoch.n !== epoch) return;
    ctx.counters.aborted++;
    ctx.counters.aborts.push({ id: ident.id, at: Date.now(), phase, generated: seq.generated });
    if (ctx.counters.aborts.length > LOG_ABORTS) ctx.counters.aborts.shift();
    record(seq, 'abort', 'aborted');
  });

  // Frontend latency counts from HTTP arrival, so the sim's own parsing time is not added twice.
  ctx.inFrontend.n++;
  // An adapter not cached on the host is read from disk before its request reaches the engine.
  const due = arrivalMs + frontendMs(cfg, g.prompt.length) + (g.lora === undefined ? 0 : ctx.lora.prepare(g.lora));
  const delay = due - performance.now();
  frontendTimer = setTimeout(() => {
    frontendTimer = null;
    ctx.inFrontend.n--;
    if (settled) return;
    if (g.stream) {
      // Starlette's StreamingResponse sends the headers before the first token exists.
      res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8' });
      // The Responses stream opens with response.created and response.in_progress, before any token.
      if (rsp) res.write(rsp.start());
      else res.flushHeaders();
      if (dieAfter === 0) {
        // die-mid-stream with afterChunks 0: the headers went out, then the replica died.
        settled = true;
        ctx.counters.diedMidStream++;
        record(seq, null, 'died');
        res.destroy();
        return;
      }
    }
    if (g.lora !== undefined) ctx.lora.track(seq);
    engine.submit(seq, due);
  }, Math.max(0, delay));
}
