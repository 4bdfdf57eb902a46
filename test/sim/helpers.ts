// Shared plumbing for the simulator tests: replicas on port 0 that close after the test, and
// small HTTP helpers on a keep-alive agent.

import type { TestContext } from 'node:test';
import { startReplica, type SimReplica, type SimReplicaOptions } from '../../bench/sim/index.js';
import { keepAliveAgent, streamChat, streamRequest, type StreamResult } from '../../bench/sim/probe.js';

export { streamChat, streamRequest, type StreamResult };

export const agent = keepAliveAgent();

/** Fast timing for tests that check behaviour, not latency. */
export const FAST: SimReplicaOptions = {
  frontendMs: 0.5,
  tokenizeMsPerToken: 0,
  stepBaseMs: 2,
  prefillMsPerToken: 0.001,
  attnMsPerTokenPair: 0,
  decodeMsPerSeq: 0,
  decodeMsPerCtxToken: 0,
};

export async function replica(t: TestContext, opts: SimReplicaOptions = {}): Promise<SimReplica> {
  const r = await startReplica(opts);
  t.after(() => r.close());
  return r;
}

export async function postJson(
  url: string,
  path: string,
  body: unknown,
  headers: Record<string, string> = { 'content-type': 'application/json' },
): Promise<{ status: number; json: any; text: string; headers: Headers }> {
  const res = await fetch(`${url}${path}`, {
    method: 'POST',
    headers,
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json: any = null;
  try {
    json = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: res.status, json, text, headers: res.headers };
}

export function chat(url: string, body: Record<string, unknown>): Promise<StreamResult> {
  return streamChat(url, body, agent);
}

export const user = (content: string) => [{ role: 'user', content }];

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A text of exactly `tokens` tokens for a message body (4 chars each). */
export function text(tokens: number, seed = 'x'): string {
  let s = '';
  let i = 0;
  while (s.length < tokens * 4) s += `${seed}${i++} lorem ipsum dolor sit amet `;
  return s.slice(0, tokens * 4);
}

/** Poll until `cond` holds (every 2 ms), failing after `timeoutMs`. */
export async function waitFor(cond: () => boolean, timeoutMs = 2000, what = 'condition'): Promise<void> {
  const end = performance.now() + timeoutMs;
  while (!cond()) {
    if (performance.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(2);
  }
}
