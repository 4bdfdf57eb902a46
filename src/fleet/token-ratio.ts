import type { Dispatcher } from 'undici';
import type { Logger } from 'pino';
import type { Metrics } from '../telemetry/metrics.js';
import type { ReplicaState } from './registry.js';

/**
 * Placement under KV pressure compares the gateway's token estimate (UTF-8 bytes / bytesPerToken)
 * with capacities in the replica's own tokens. The ratio between the two is learnt from usage
 * chunks, but a fleet's first sessions are placed before any answer has come back: with a
 * tokenizer that makes 3× the estimate (a small vocabulary), a full fleet then looks as if it had
 * room and the first agents are spread by key. So when a replica's models are first read, one
 * /tokenize of a fixed text (vLLM's endpoint) tells the ratio before any session arrives. A replica
 * without the endpoint (llama.cpp's takes another shape, older servers none) is counted and left
 * to the usage chunks.
 */
export const RATIO_SAMPLE = [
  'Thank you for calling the city service line. I can help you report a problem with a street light,',
  'a missed garbage collection, a water leak or a blocked drain, and I can tell you the opening hours',
  'of every public office in the district. Please tell me your address, or the nearest crossing, and',
  'describe what you see. If the problem is dangerous, for example a fallen power line or gas smell,',
  'hang up and call the emergency number at once. Otherwise I will open a ticket, read its number back',
  'to you, and send a text message when a crew has been assigned. Most requests are handled within',
  'three working days; repairs that need a permit can take up to two weeks.',
].join(' ');

export interface TokenRatioDeps {
  agent: Dispatcher;
  metrics: Metrics;
  log: Logger;
  timeoutMs: () => number;
  bytesPerToken: () => number;
  /** Estimated and reported tokens of the same text: the router's token scale learns from it. */
  observe(estimated: number, reported: number): void;
}

export function createTokenRatioProbe(deps: TokenRatioDeps): (r: ReplicaState) => Promise<void> {
  const sampleBytes = Buffer.byteLength(RATIO_SAMPLE);
  return async function probe(r) {
    const model = r.models === null ? undefined : [...r.models][0];
    if (model === undefined) return;
    const timeoutMs = deps.timeoutMs();
    try {
      const res = await deps.agent.request({
        origin: r.origin, path: '/tokenize', method: 'POST',
        headers: { 'content-type': 'application/json', ...(r.apiKey ? { authorization: `Bearer ${r.apiKey}` } : {}) },
        body: JSON.stringify({ model, prompt: RATIO_SAMPLE, add_special_tokens: false }),
        headersTimeout: timeoutMs, bodyTimeout: timeoutMs, signal: AbortSignal.timeout(timeoutMs),
      });
      // Only a JSON answer is read: anything else (an error page, a server that streams whatever it
      // is sent) is discarded without being buffered.
      const json = res.statusCode === 200 && String(res.headers['content-type'] ?? '').startsWith('application/json');
      if (!json) await res.body.dump({ limit: 0 });
      const count = json ? (JSON.parse(await res.body.text()) as { count?: unknown }).count : undefined;
      if (typeof count !== 'number' || !(count > 0)) {
        deps.metrics.tokenRatioProbes.inc({ replica: r.name, outcome: 'unsupported' });
        deps.log.warn({ replica: r.name, status: res.statusCode }, 'no usable /tokenize on this replica: its token ratio is learnt from answers only, so the first sessions under KV pressure are placed with the estimate as it is');
        return;
      }
      deps.observe(Math.ceil(sampleBytes / deps.bytesPerToken()), count);
      deps.metrics.tokenRatioProbes.inc({ replica: r.name, outcome: 'learned' });
    } catch (e) {
      deps.metrics.tokenRatioProbes.inc({ replica: r.name, outcome: 'failed' });
      deps.log.warn({ replica: r.name, err: (e as Error).message }, '/tokenize probe failed: the token ratio is learnt from answers only');
    }
  };
}
