// A recorded run: every request as one replica's engine saw it (when it was sent, where it went,
// its prompt and output token ids, what the replica served from its cache) and the replicas'
// own prefix-cache counters around the run. It is what the simulator is replayed against.
//
// Token ids are stored against the longest prefix shared with an earlier request of the trace
// (`base`, `common`, `rest`), so a trace of many prompts over a few shared system prompts stays
// small enough to commit as a test fixture.

import { readFileSync, writeFileSync } from 'node:fs';

export interface TraceRequest {
  /** ms from the start of the run to the request's send. */
  atMs: number;
  /** Index of the replica (fleet order) that served it; -1 when the request failed before one did. */
  replica: number;
  /** Why the router sent it there (x-warmroute-route), when it said. */
  route: string | null;
  /** Group of the workload (the shared prompt or the session it belongs to), for the ideal's partitions. */
  group: string;
  promptIds: number[];
  outputIds: number[];
  /** The session key it carried (x-session-id), if any. */
  sessionKey?: string;
  /** A chat request's messages as sent (the router identifies chat by them); absent for completions. */
  messages?: ChatMessage[];
  cachedTokens: number | null;
  ttftMs: number | null;
  totalMs: number;
  error: string | null;
}

export interface ChatMessage {
  role: string;
  content: string;
}

export interface ReplicaCounters {
  queries: number;
  hits: number;
}

export interface Trace {
  kind: 'warmroute-trace';
  workload: string;
  strategy: string;
  when: string;
  /** The replicas' engine: block size, blocks per replica (as vLLM reports num_gpu_blocks), batch limits. */
  engine: { blockSize: number; kvBlocks: number; maxNumBatchedTokens: number; maxNumSeqs: number };
  replicas: string[];
  /** vllm:prefix_cache_* per replica, the difference over the run. */
  counters: ReplicaCounters[];
  /** Blocks each replica's KV events stored and removed over the run (absent: not captured). */
  kvEvents?: { stored: number; removed: number }[];
  requests: TraceRequest[];
}

interface StoredRequest extends Omit<TraceRequest, 'promptIds' | 'messages'> {
  /** Index of the earlier request whose prompt shares the first `common` tokens; -1 for none. */
  base: number;
  common: number;
  rest: number[];
  /** Chat: the first `msgCommon` messages are those of request `msgBase`, then `msgRest`. */
  msgBase?: number;
  msgCommon?: number;
  msgRest?: ChatMessage[];
}

interface StoredTrace extends Omit<Trace, 'requests'> {
  requests: StoredRequest[];
}

function commonLength(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

export function packTrace(t: Trace): StoredTrace {
  const requests = t.requests.map((r, i): StoredRequest => {
    let base = -1;
    let common = 0;
    for (let j = 0; j < i; j++) {
      const c = commonLength(t.requests[j].promptIds, r.promptIds);
      if (c > common) {
        common = c;
        base = j;
      }
    }
    const { promptIds, messages, ...rest } = r;
    const stored: StoredRequest = { ...rest, base, common, rest: promptIds.slice(common) };
    if (messages !== undefined) {
      let msgBase = -1;
      let msgCommon = 0;
      for (let j = i - 1; j >= 0 && msgBase < 0; j--) {
        const m = t.requests[j].messages;
        if (m === undefined || t.requests[j].group !== r.group) continue;
        let c = 0;
        while (c < m.length && c < messages.length && m[c].role === messages[c].role && m[c].content === messages[c].content) c++;
        msgBase = j;
        msgCommon = c;
      }
      Object.assign(stored, { msgBase, msgCommon, msgRest: messages.slice(msgCommon) });
    }
    return stored;
  });
  return { ...t, requests };
}

export function unpackTrace(s: StoredTrace): Trace {
  const requests: TraceRequest[] = [];
  for (const r of s.requests) {
    const { base, common, rest, msgBase, msgCommon, msgRest, ...fields } = r;
    const head = base < 0 ? [] : requests[base].promptIds.slice(0, common);
    const req: TraceRequest = { ...fields, promptIds: [...head, ...rest] };
    if (msgRest !== undefined) req.messages = [...(msgBase === undefined || msgBase < 0 ? [] : (requests[msgBase].messages ?? []).slice(0, msgCommon)), ...msgRest];
    requests.push(req);
  }
  return { ...s, requests };
}

export function writeTrace(file: string, t: Trace): void {
  writeFileSync(file, `${JSON.stringify(packTrace(t))}\n`);
}

export function readTrace(file: string): Trace {
  const s = JSON.parse(readFileSync(file, 'utf8')) as StoredTrace;
  if (s.kind !== 'warmroute-trace') throw new Error(`${file} is not a recorded trace`);
  return unpackTrace(s);
}

/** Hit rate as vLLM counts it: cached prompt tokens over prompt tokens, requests that were served. */
export function hitRate(requests: readonly { promptIds: readonly number[]; cachedTokens: number | null }[]): number {
  let q = 0;
  let h = 0;
  for (const r of requests) {
    if (r.cachedTokens === null) continue;
    q += r.promptIds.length;
    h += r.cachedTokens;
  }
  return q === 0 ? 0 : h / q;
}
