import type { Dispatcher } from 'undici';
import type { ReplicaState } from './registry.js';

/**
 * A prompt as a one-token request: the replica prefills (and caches) the whole prompt and stops
 * at its first token. Off the request path (drain handoff, deploy warmup), so re-encoding is fine.
 */
export function oneTokenBody(prompt: Record<string, unknown>): Buffer {
  const b: Record<string, unknown> = { ...prompt, max_tokens: 1, stream: false, n: 1 };
  if ('max_completion_tokens' in b) b.max_completion_tokens = 1;
  if ('max_output_tokens' in b) b.max_output_tokens = 1;
  delete b.stream_options;
  return Buffer.from(JSON.stringify(b));
}

export interface ReplayResult {
  readonly ok: boolean;
  readonly status: number;
  readonly error: string | null;
  readonly ms: number;
}

/**
 * POSTs a one-token request to a replica (its own api key, if it has one); never throws. Ends at
 * `timeoutMs` or when `stop` fires (the gateway shuts down: a replay must not hold its exit).
 */
export async function replay(agent: Dispatcher, r: ReplicaState, target: string, body: Buffer, timeoutMs: number, stop: AbortSignal): Promise<ReplayResult> {
  const t0 = performance.now();
  try {
    const res = await agent.request({
      origin: r.origin, path: target, method: 'POST', body,
      headers: { 'content-type': 'application/json', ...(r.apiKey ? { authorization: `Bearer ${r.apiKey}` } : {}) },
      signal: AbortSignal.any([AbortSignal.timeout(timeoutMs), stop]),
    });
    await res.body.dump();
    const ok = res.statusCode >= 200 && res.statusCode < 300;
    return { ok, status: res.statusCode, error: ok ? null : `answered ${res.statusCode}`, ms: performance.now() - t0 };
  } catch (e) {
    return { ok: false, status: 0, error: (e as Error).message, ms: performance.now() - t0 };
  }
}

/** Runs `work` over `items` with at most `concurrency` at once; stops taking new items once `stop()` says so. */
export async function pool<T>(items: readonly T[], concurrency: number, work: (item: T) => Promise<void>, stop: () => boolean = () => false): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length && !stop()) await work(items[next++]);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
}
