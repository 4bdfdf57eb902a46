// The simulator's --otlp-traces-endpoint: vLLM's llm_request span, parented by the request's
// traceparent, with vLLM's latency attributes on the engine's own marks.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startOtlpCollector, type CollectedSpan, type OtlpCollector } from '../../bench/lib/otlp-collector.js';
import { LLM_REQUEST } from '../../bench/sim/tracing.js';
import { waitFor } from '../helpers/wait.js';
import { messagesOfTokens } from '../../bench/sim/probe.js';
import { agent, FAST, replica, streamRequest } from './helpers.js';

const attr = (s: CollectedSpan, key: string) => {
  const v = s.attributes?.find((a) => a.key === key)?.value;
  return v?.doubleValue ?? (v?.intValue !== undefined ? Number(v.intValue) : v?.stringValue);
};

describe('simulator: llm_request spans', () => {
  let col: OtlpCollector;
  before(async () => { col = await startOtlpCollector(); });
  after(() => col.close());

  it('one SERVER span per finished request, the traceparent its parent, vLLM\'s phases adding up to its TTFT', async (t) => {
    // A slow step so the second request waits in the engine's queue behind the first.
    const r = await replica(t, { ...FAST, stepBaseMs: 30, maxNumSeqs: 1, outputTokens: { min: 3, max: 3 }, otlpTracesEndpoint: `${col.url}/v1/traces` });
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const parent = '00f067aa0ba902b7';
    const body = (n: string) => ({ stream: true, stream_options: { include_usage: true }, max_tokens: 8, messages: messagesOfTokens(200, n) });
    const [a, b] = await Promise.all([
      streamRequest(r.url, '/v1/chat/completions', body('first'), agent),
      streamRequest(r.url, '/v1/chat/completions', body('second'), agent, { traceparent: `00-${traceId}-${parent}-01` }),
    ]);
    assert.equal(a.status, 200);
    assert.equal(b.status, 200);
    await waitFor('two llm_request spans', () => col.spans().filter((s) => s.name === LLM_REQUEST.span).length >= 2, 10_000);
    const spans = col.spans().filter((s) => s.name === LLM_REQUEST.span);
    const traced = spans.find((s) => s.traceId === traceId);
    assert.ok(traced, 'the traced request\'s span is in the caller\'s trace');
    assert.equal(traced.parentSpanId, parent);
    assert.equal(traced.kind, 2, 'SERVER');
    assert.equal(traced.service, 'vllm');
    const untraced = spans.find((s) => s.traceId !== traceId)!;
    assert.ok(!untraced.parentSpanId, 'without a traceparent, a trace of its own');

    const ms = (k: string) => Number(attr(traced, k)) * 1000;
    assert.ok(ms(LLM_REQUEST.queue) >= 25, `queued behind the first request's step: ${ms(LLM_REQUEST.queue)} ms`);
    assert.ok(ms(LLM_REQUEST.prefill) > 0 && ms(LLM_REQUEST.decode) > 0);
    assert.ok(Math.abs(ms(LLM_REQUEST.queue) + ms(LLM_REQUEST.prefill) - ms(LLM_REQUEST.ttft)) < 0.01, 'queue + prefill = time to first token');
    assert.ok(Math.abs(ms(LLM_REQUEST.ttft) + ms(LLM_REQUEST.decode) - ms(LLM_REQUEST.e2e)) < 0.01, 'time to first token + decode = e2e');
    const durMs = Number(BigInt(traced.endTimeUnixNano) - BigInt(traced.startTimeUnixNano)) / 1e6;
    assert.ok(Math.abs(durMs - ms(LLM_REQUEST.e2e)) < 1, `the span lasts its e2e: ${durMs} vs ${ms(LLM_REQUEST.e2e)}`);
    assert.equal(attr(traced, LLM_REQUEST.promptTokens), b.usage?.prompt_tokens);
    assert.equal(attr(traced, LLM_REQUEST.completionTokens), 3);
    assert.equal(attr(traced, LLM_REQUEST.maxTokens), 8);
    assert.match(String(attr(traced, LLM_REQUEST.requestId)), /^chatcmpl-/);
  });
});
