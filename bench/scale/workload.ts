// The scale bench's workload: bench/voice's voice sessions (the same plans, prompts and keys),
// sized for many replicas and many sessions. Agents grow with the sessions (one per
// SESSIONS_PER_AGENT), answers are short (the light simulator: a few tokens each), think times
// are short, and sessions start spread at a fixed rate so the request rate of a socket run stays
// what two shared cores can carry, whatever S is.

import { buildWorkload, type Workload, type WorkloadOptions } from '../voice/workload.js';

export const SESSIONS_PER_AGENT = 8;

export interface ScaleWorkloadOptions {
  sessions: number;
  turns: number;
  /** New sessions per second over the start window. */
  startsPerSecond: number;
  seed: number;
}

export const SCALE_WORKLOAD_DEFAULTS: Readonly<Omit<ScaleWorkloadOptions, 'sessions'>> = Object.freeze({ turns: 4, startsPerSecond: 40, seed: 21 });

/** Answers of the light simulator: a few tokens, so a request costs the fleet little CPU. */
export const LIGHT_OUTPUT_TOKENS: [number, number] = [3, 8];

/** KV blocks per replica: a few agents' prompts and their sessions each, so placement matters. */
export const SCALE_KV_BLOCKS = 1024;

export function scaleWorkloadOptions(o: ScaleWorkloadOptions): WorkloadOptions {
  return {
    sessions: o.sessions,
    turns: o.turns,
    groups: Math.max(2, Math.ceil(o.sessions / SESSIONS_PER_AGENT)),
    systemTokens: [1000, 3000],
    userTokens: [10, 40],
    toolTurnShare: 0.1,
    keylessShare: 0.3,
    bodyKeyShare: 0.33,
    thinkMs: [300, 900],
    startSpreadMs: Math.round((o.sessions / o.startsPerSecond) * 1000),
    startRamp: false,
    seed: o.seed,
  };
}

export function buildScaleWorkload(o: ScaleWorkloadOptions): Workload {
  return buildWorkload(scaleWorkloadOptions(o));
}
