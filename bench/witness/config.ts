// inference-perf's own configuration for each workload the witness runs: its `shared_prefix` data
// (G system prompts × U users, a question each, sent keyless to /v1/completions, streamed) at a
// constant rate, and the same with `enable_multi_turn_chat` for sessions that grow turn by turn
// (each user a session, its id in x-session-id). Token counts are the served model's own: the
// tool tokenizes with the local tiny model's tokenizer, nothing is downloaded.

import { WORKLOADS, type SharedPrefixWorkload, type Workload } from '../calibrate/workloads.js';

/** The calibration's shared-prefix workloads, and inference-perf's multi-turn sessions of the same shape. */
export type WitnessWorkload = Omit<SharedPrefixWorkload, 'kind' | 'seed'> & { multiTurn: boolean };

const asWitness = (w: Workload): WitnessWorkload => {
  if (w.kind !== 'shared-prefix') throw new Error('the witness runs shared-prefix workloads');
  const { kind: _kind, seed: _seed, ...rest } = w;
  return { ...rest, multiTurn: false };
};

export const WITNESS_WORKLOADS: Record<string, WitnessWorkload> = {
  // 6 × 1,400 tokens: the fleet's 12K of cache holds every prompt once they are split.
  shared: asWitness(WORKLOADS.shared),
  // 12 × 1,400 = 16.8K tokens of prefix against 12K: some groups must be cold.
  'shared-pressure': asWitness(WORKLOADS['shared-pressure']),
  // 8 × 600-token prompts, 3 users each, every user a session whose context grows each turn. In
  // inference-perf 0.7 a turn's prompt is the whole context so far plus the group's prompt and a
  // new question, so a context grows by ~650 tokens a turn: 5 turns stay within the fleet's
  // 4,608-token context (at 1,000-token prompts they did not, and a fifth of the requests failed).
  'multi-turn': { groups: 8, usersPerGroup: 3, systemTokens: 600, questionTokens: 50, outputTokens: 16, ratePerS: 2, durationS: 60, multiTurn: true },
};

/** YAML (JSON is YAML) for one run: `seed` makes a run's prompts its own, so no run starts warm from another's. */
export function witnessConfig(w: WitnessWorkload, o: { baseUrl: string; model: string; tokenizerDir: string; outDir: string; seed: number }): string {
  return JSON.stringify({
    api: { type: 'completion', streaming: true, ...(w.multiTurn ? { session_id_header_key: 'x-session-id' } : {}) },
    data: {
      type: 'shared_prefix',
      shared_prefix: {
        num_groups: w.groups, num_prompts_per_group: w.usersPerGroup, system_prompt_len: w.systemTokens,
        question_len: w.questionTokens, output_len: w.outputTokens, seed: o.seed, enable_multi_turn_chat: w.multiTurn,
      },
    },
    load: { type: 'constant', stages: [{ rate: w.ratePerS, duration: w.durationS }], request_timeout: 120 },
    server: { type: 'vllm', model_name: o.model, base_url: o.baseUrl, ignore_eos: true },
    tokenizer: { pretrained_model_name_or_path: o.tokenizerDir },
    storage: { local_storage: { path: o.outDir } },
  }, null, 2);
}

export interface WitnessSummary {
  ttftP50Ms: number | null;
  ttftP90Ms: number | null;
  successes: number;
  failures: number;
}

type Num = number | null | undefined;
interface Lifecycle {
  successes?: { count?: Num; latency?: { time_to_first_token?: { median?: Num; p50?: Num; p90?: Num } } };
  failures?: { count?: Num };
}

/** inference-perf's summary_lifecycle_metrics.json: TTFT in seconds, request counts. */
export function readWitnessSummary(json: string): WitnessSummary {
  const s = JSON.parse(json) as Lifecycle;
  const ttft = s.successes?.latency?.time_to_first_token;
  const ms = (x: Num) => (typeof x === 'number' ? x * 1000 : null);
  return { ttftP50Ms: ms(ttft?.p50 ?? ttft?.median), ttftP90Ms: ms(ttft?.p90), successes: s.successes?.count ?? 0, failures: s.failures?.count ?? 0 };
}
