// Faults a test can switch on per replica. Each kind is independent; `times` makes a fault hit
// only the next N requests and then clear itself (e.g. "the first attempt dies mid-stream").

export type Fault =
  /** Stop accepting: listener closed, every socket destroyed. Optionally re-listen after a delay. */
  | { kind: 'crash'; recoverAfterMs?: number }
  /** Re-listen on the same port after a crash (a restarted vLLM: empty KV cache, new process start time). */
  | { kind: 'recover' }
  /** A restart too quick for health checks to notice: in-flight dropped, KV cache and counters emptied, new process start time. */
  | { kind: 'restart' }
  /** Accept requests but never send response headers. */
  | { kind: 'stall'; times?: number }
  /** Destroy the socket after N content chunks of a stream. */
  | { kind: 'die-mid-stream'; afterChunks?: number; times?: number }
  /** Stop sending after N content chunks of a stream, keeping the connection open (a hung GPU). */
  | { kind: 'stall-mid-stream'; afterChunks?: number; times?: number }
  /** 503 as when the waiting queue is full. */
  | { kind: 'busy'; times?: number }
  /** Multiply step times. */
  | { kind: 'slow'; factor?: number }
  /** Engine dead: /health 503, completions 500 with an empty body, as vLLM's shutdown handler does. */
  | { kind: 'unhealthy' };

export type FaultKind = Fault['kind'];

const KINDS: readonly FaultKind[] = ['crash', 'recover', 'restart', 'stall', 'die-mid-stream', 'stall-mid-stream', 'busy', 'slow', 'unhealthy'];

const NUMERIC_FIELDS = ['recoverAfterMs', 'times', 'afterChunks', 'factor'] as const;

export function parseFault(x: unknown): Fault {
  if (!x || typeof x !== 'object') throw new Error('fault must be an object with a "kind"');
  const o = x as Record<string, unknown>;
  if (typeof o.kind !== 'string' || !KINDS.includes(o.kind as FaultKind)) {
    throw new Error(`unknown fault kind ${JSON.stringify(o.kind)}; one of ${KINDS.join(', ')}`);
  }
  const f: Record<string, unknown> = { kind: o.kind };
  for (const k of NUMERIC_FIELDS) {
    if (o[k] === undefined) continue;
    const v = Number(o[k]);
    if (!Number.isFinite(v) || v < 0) throw new Error(`fault field ${k} must be a non-negative number`);
    f[k] = v;
  }
  return f as Fault;
}

/** CLI form: "kind" or "kind:field=value,field=value", e.g. "die-mid-stream:afterChunks=3,times=1". */
export function parseFaultArg(arg: string): Fault {
  const [kind, rest] = arg.split(':', 2);
  const o: Record<string, unknown> = { kind };
  for (const kv of (rest ?? '').split(',').filter(Boolean)) {
    const [k, v] = kv.split('=', 2);
    o[k] = v;
  }
  return parseFault(o);
}

export interface FaultState {
  set(f: Fault): void;
  clear(kind?: FaultKind): void;
  get<K extends FaultKind>(kind: K): Extract<Fault, { kind: K }> | undefined;
  /** The fault of that kind if active, consuming one of its `times`. */
  take<K extends FaultKind>(kind: K): Extract<Fault, { kind: K }> | undefined;
  list(): Fault[];
}

export function createFaultState(): FaultState {
  const active = new Map<FaultKind, Fault>();
  return {
    set(f) {
      active.set(f.kind, { ...f });
    },
    clear(kind) {
      if (kind) active.delete(kind);
      else active.clear();
    },
    get(kind) {
      return active.get(kind) as never;
    },
    take(kind) {
      const f = active.get(kind) as (Fault & { times?: number }) | undefined;
      if (!f) return undefined;
      if (f.times !== undefined) {
        if (f.times <= 1) active.delete(kind);
        else f.times--;
      }
      return f as never;
    },
    list: () => [...active.values()].map((f) => ({ ...f })),
  };
}
