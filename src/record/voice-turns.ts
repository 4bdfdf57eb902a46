// One voice turn, both halves: the caller's end of speech, as the transcription.done a realtime
// connection relayed, joined to the reply's first token, from the next chat or Messages request of
// the same session key. The gap between them is the turn's own latency (warmroute_voice_turn_gap_seconds).

import type { SpanContext } from '@opentelemetry/api';

/** One caller utterance's end, waiting for the request that answers it. */
export interface SpeechEnd {
  /** performance.now() ms of the transcription.done relayed. */
  readonly at: number;
  /** The realtime connection's span (tracing on), for the reply's span link. */
  readonly link: SpanContext | null;
}

export interface VoiceTurns {
  /** A realtime connection of `session` relayed a transcription.done at `at`. */
  speechEnded(session: string, at: number, link: SpanContext | null): void;
  /**
   * A request of `session` was routed at `at`: the speech end it answers, taken (the turn's later
   * calls, and a request older than the speech, get null).
   */
  claim(session: string, at: number): SpeechEnd | null;
  readonly size: number;
}

/**
 * Bounded: at most `maxSessions` speech ends wait (the oldest out first), each at most `maxAgeMs`
 * (a request that long after the speech does not answer it).
 */
export function createVoiceTurns(o: { maxSessions: number; maxAgeMs: number }): VoiceTurns {
  const ends = new Map<string, SpeechEnd>();
  return {
    speechEnded(session, at, link) {
      ends.delete(session);
      if (ends.size >= o.maxSessions) ends.delete(ends.keys().next().value!);
      ends.set(session, { at, link });
    },
    claim(session, at) {
      if (ends.size === 0) return null;
      const e = ends.get(session);
      if (e === undefined || e.at > at) return null;
      ends.delete(session);
      return at - e.at > o.maxAgeMs ? null : e;
    },
    get size() { return ends.size; },
  };
}
