// One simulated replica in virtual time: the simulator's own request parsing, output plan, engine
// (scheduler, chunked prefill, preemption) and KV block pool, with no HTTP. What the HTTP replica
// adds is its frontend delay (timing.ts frontendMs), applied here before the engine sees the
// request, as bench/sim/generate.ts does.

import { resolveConfig, type SimConfig, type SimReplicaOptions } from '../../sim/config.js';
import { createEngine, type Engine } from '../../sim/engine.js';
import { createBlockPool, type BlockPool } from '../../sim/kv-cache.js';
import { planOutput } from '../../sim/output.js';
import { parseChat } from '../../sim/request.js';
import { createSeq, NO_SALT_ROOT, saltRoot } from '../../sim/sequence.js';
import { frontendMs } from '../../sim/timing.js';
import { SPECIAL } from '../../sim/tokenizer.js';
import { createLoraState, loraRoot, type LoraState } from '../../sim/lora.js';
import type { ToolCall } from '../../voice/client.js';
import type { VirtualClock } from './clock.js';

export interface VirtualAnswer {
  /** Virtual ms from arrival at the replica to its first token; null when refused. */
  ttftMs: number | null;
  content: string;
  toolCall: ToolCall | null;
  finishReason: string | null;
  promptTokens: number;
  cachedTokens: number;
  error: string | null;
}

export interface VirtualReplica {
  name: string;
  config: SimConfig;
  pool: BlockPool;
  engine: Engine;
  /** Its LoRA adapters and slots (the options' maxLoras, loraModules, ...), as bench/sim/lora.ts serves them. */
  lora: LoraState;
  /** Queries and hits of the prefix cache at first admission, as vllm:prefix_cache_* count them. */
  queries: number;
  hits: number;
  /**
   * Serves one chat request; `first` runs in virtual time at its first token, `done` when its
   * answer is complete. `abort` cancels it before its first token (false once that has come).
   */
  serve(body: Record<string, unknown>, done: (a: VirtualAnswer) => void, first?: () => void): { abort(): boolean };
}

let ids = 0;

/** `options`: the simulator's replica knobs (capacity, timing, scheduling policy, output lengths). */
export function createVirtualReplica(clock: Pick<VirtualClock, 'now' | 'setTimeout' | 'clearTimeout'>, index: number, options: SimReplicaOptions): VirtualReplica {
  const config = resolveConfig(options, index);
  const pool = createBlockPool(config.kvBlocks, null, config.blockSize, config.kvModel);
  const lora = createLoraState(config);
  const r: VirtualReplica = {
    name: config.name, config, pool, queries: 0, hits: 0, lora,
    engine: createEngine(config, pool, {
      onAdmit(_seq, queried, hit, first) {
        if (!first) return;
        r.queries += queried;
        r.hits += hit;
      },
      onFirstToken() {},
      onToken() {},
      onFinish() {},
      onPreempt() {},
      mayAdmit: lora.enabled ? (seq, running) => lora.admits(seq, running) : undefined,
    }, clock),
    serve(body, done, first) {
      // An adapter's request runs the base model with it, as routes.ts serves it.
      const model = body.model;
      const adapter = typeof model === 'string' && model !== config.model && lora.has(model) ? model : null;
      const g = parseChat(adapter === null ? body : { ...body, model: config.model }, config);
      const arrival = clock.now();
      if ('status' in g) {
        done({ ttftMs: null, content: '', toolCall: null, finishReason: null, promptTokens: 0, cachedTokens: 0, error: `${g.status} ${g.body}` });
        return { abort: () => false };
      }
      // ignore_eos: the answer runs to its max_tokens, as vLLM's does (generate.ts).
      const length = g.ignoreEos ? { min: g.maxTokens + 1, max: g.maxTokens + 1 } : config.outputTokens;
      const plan = planOutput({ seed: config.seed, prompt: g.prompt, length, tool: g.tool, eosId: SPECIAL.endOfTurn });
      let ttftMs: number | null = null;
      let aborted = false;
      const seq = createSeq({
        id: `v-${ids++}`, prompt: g.prompt, root: loraRoot(g.cacheSalt === undefined ? NO_SALT_ROOT : saltRoot(g.cacheSalt), adapter), plan, lora: adapter,
        maxOut: Math.min(plan.ids.length, g.maxTokens), httpArrivalMs: arrival, priority: g.priority,
        sink: {
          onToken(_s, index) {
            if (index !== 0) return;
            ttftMs = clock.now() - arrival;
            first?.();
          },
          onFinish(s, reason) {
            const natural = s.generated >= plan.ids.length;
            const text = plan.deltas.slice(0, s.generated).map((d) => (d.t === 'text' ? d.text : '')).join('');
            done({
              ttftMs, content: plan.tool ? '' : text, toolCall: plan.tool && natural ? { ...plan.tool } : null,
              finishReason: reason === 'abort' ? null : natural ? (plan.finish === 'tool_calls' && g.toolNamed ? 'stop' : plan.finish) : 'length',
              promptTokens: s.promptLen, cachedTokens: Math.max(0, s.cachedTokens), error: reason === 'abort' ? 'aborted' : null,
            });
          },
        },
      });
      const due = arrival + frontendMs(config, g.prompt.length) + (adapter === null ? 0 : lora.prepare(adapter));
      clock.setTimeout(() => {
        if (aborted) return;
        r.engine.submit(seq, due);
        if (adapter !== null) lora.track(seq);
      }, due - arrival);
      return {
        abort() {
          if (aborted || ttftMs !== null) return false;
          aborted = true;
          r.engine.abort(seq);
          return true;
        },
      };
    },
  };
  return r;
}
