// The state caller turns keep (turns.ts), shared with the part that hears other gateways' turns (turns-shared.ts).

import type { TurnOpened } from '../store/types.js';

export const TURN_CLOSE_CAUSES = ['next', 'idle', 'evicted'] as const;
export type TurnCloseCause = (typeof TURN_CLOSE_CAUSES)[number];

/** A closed turn as the admin view shows it. */
export interface TurnSummary {
  readonly index: number;
  readonly calls: number;
  /** Calls that overlapped no other call of the turn. */
  readonly sequential: number;
  /** Calls that ran while another call of the turn was open. */
  readonly overlapped: number;
  /** First request received → first content token of the last call that produced content; null: none did. */
  readonly waitMs: number | null;
  /** Sum over the calls of the replica's TTFT (request written → first token) and the generation after it. */
  readonly llmMs: number;
  readonly overBudget: boolean;
  readonly startedAt: string;
  readonly closedBy: TurnCloseCause;
}

export interface Call { received: number; sent: number; firstToken: number; ended: number }

export interface Turn {
  readonly index: number;
  readonly utterance: string | null;
  /** chain[lastUser] of the turn's first call, and that index: a later turn repeating the same words extends it. */
  readonly anchor: string | null;
  readonly anchorIndex: number;
  readonly started: number;
  readonly calls: Call[];
  callCount: number;
  open: number;
  closing: TurnCloseCause | null;
  done: boolean;
  /** Another gateway opened the same turn at the same moment and counts it: this one forwards its calls there. */
  owner: string | null;
}

export interface Session {
  readonly id: string;
  next: number;
  current: Turn | null;
  lastActivity: number;
  readonly history: TurnSummary[];
  /** The session's latest turn as another gateway opened it (a shared store), and its calls seen here. */
  remote: TurnOpened | null;
  remoteCalls: number;
}

/** Where a call fell: a turn of this gateway's, or (`foreign`) one another gateway opened and counts. */
export interface Placed { readonly session: Session; readonly turn: Turn | null; readonly call: number; readonly foreign: TurnOpened | null }

/** What tells a call of the same turn: the words, and the link that anchors them. */
export type TurnWords = Pick<Turn, 'utterance' | 'anchor' | 'anchorIndex'>;

export const toWall = (mono: number) => (mono > 0 ? performance.timeOrigin + mono : 0);
export const toMono = (wall: number) => (wall > 0 ? wall - performance.timeOrigin : 0);

/** Calls whose times are kept per turn; past it a (runaway) tool loop is still counted. */
export const MAX_CALLS_KEPT = 256;

export const wall = (mono: number) => new Date(performance.timeOrigin + mono).toISOString();

/** Whether call i's [received, ended] intersects another call's. */
export function overlapCount(calls: readonly Call[], now: number): number {
  let n = 0;
  for (let i = 0; i < calls.length; i++) {
    const a = calls[i];
    const aEnd = a.ended || now;
    for (let j = 0; j < calls.length; j++) {
      if (j === i) continue;
      const b = calls[j];
      if (a.received < (b.ended || now) && b.received < aEnd) { n++; break; }
    }
  }
  return n;
}
