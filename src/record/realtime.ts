// Once per realtime connection: its counters and its one access line, whether it was refused at the
// upgrade or relayed for minutes; per utterance, the transcription's timings.

import type { Logger } from 'pino';
import type { RealtimeRoute } from '../routing/realtime-pick.js';
import type { Utterance } from '../stream/realtime-tap.js';
import type { Metrics } from '../telemetry/metrics.js';
import type { SessionTagger } from '../telemetry/session-tag.js';
import { throttle } from '../telemetry/throttle.js';
import type { OpenFailure } from '../upstream/realtime-relay.js';

/** Why a refused upgrade was refused (warmroute_realtime_refused_total{reason}). */
export type RealtimeRefusal = 'not_found' | 'bad_request' | 'unauthorized' | 'key_limit' | 'gateway_limit' | 'replica_limit' | 'no_replica' | 'model_not_found' | 'shutting_down' | 'upstream_failed' | 'client_gone';
export const REALTIME_REFUSALS: readonly RealtimeRefusal[] = ['not_found', 'bad_request', 'unauthorized', 'key_limit', 'gateway_limit', 'replica_limit', 'no_replica', 'model_not_found', 'shutting_down', 'upstream_failed', 'client_gone'];

/** Why a relayed connection ended (warmroute_realtime_closed_total{reason}). */
export type RealtimeClose = 'client' | 'replica' | 'replica_failed' | 'idle' | 'frame_too_large' | 'replica_drained' | 'shutdown';
export const REALTIME_CLOSES: readonly RealtimeClose[] = ['client', 'replica', 'replica_failed', 'idle', 'frame_too_large', 'replica_drained', 'shutdown'];

/** Who chose the subprotocol a client was answered with. */
export type ProtocolBy = 'replica' | 'gateway';

/** What the access line of a realtime connection says. */
export interface RealtimeEnded {
  /** 101 once accepted; the refusal's status otherwise. */
  readonly status: number;
  readonly outcome: RealtimeRefusal | RealtimeClose;
  readonly replica: string | null;
  readonly route: RealtimeRoute | null;
  readonly attempts: number;
  readonly key: string | null;
  readonly priority: string | null;
  readonly sessionKey: string | null;
  readonly sessionSource: string | null;
  /** The subprotocol the client was answered with (never a key), and who chose it. */
  readonly protocol: string | null;
  readonly protocolBy: ProtocolBy | null;
  /** The close code the client was sent (or sent), and its reason. */
  readonly closeCode: number | null;
  readonly closeReason: string | null;
  /** Upgrade received → accepted (the replica's session.created included); null when refused. */
  readonly openMs: number | null;
  readonly durationMs: number;
  readonly framesIn: number;
  readonly framesOut: number;
  readonly bytesIn: number;
  readonly bytesOut: number;
  readonly utterances: number;
  /** The refusal's error code. */
  readonly err: string | null;
}

export interface RealtimeRecorder {
  readonly sessionTag: SessionTagger;
  /** A replica failed the connection before session.created: counted, and a warn line (throttled). */
  replaced(replica: string, cause: OpenFailure, detail: string, next: boolean): void;
  utterance(replica: string, u: Utterance): void;
  accepted(replica: string, route: RealtimeRoute): void;
  ended(e: RealtimeEnded): void;
}

const round = (v: number) => Math.round(v * 1000) / 1000;

export function createRealtimeRecorder(deps: { metrics: Metrics; log: Logger; sessionTag: SessionTagger }): RealtimeRecorder {
  const { metrics: m, log, sessionTag } = deps;
  const replacedWarning = throttle(10_000);
  for (const reason of REALTIME_REFUSALS) m.realtimeRefused.inc({ reason }, 0);
  for (const reason of REALTIME_CLOSES) m.realtimeClosed.inc({ reason }, 0);
  return {
    sessionTag,
    replaced(replica, cause, detail, next) {
      m.realtimeReplaced.inc({ replica, cause });
      const suppressed = replacedWarning();
      if (suppressed !== null) log.warn({ replica, cause, detail, suppressed }, next ? 'realtime: replica failed before session.created, trying the next one' : 'realtime: replica failed before session.created, and no other replica is left: upgrade refused');
    },
    utterance(replica, u) {
      if (u.firstDelta > 0) m.realtimeFirstDelta.observe({ replica }, (u.firstDelta - u.started) / 1000);
      m.realtimeDone.observe({ replica }, (u.done - u.lastCommit) / 1000);
    },
    accepted(replica, route) {
      m.realtimeAccepted.inc({ replica, route });
    },
    ended(e) {
      if (e.status === 101) m.realtimeClosed.inc({ reason: e.outcome });
      else m.realtimeRefused.inc({ reason: e.outcome });
      if (!log.isLevelEnabled('info')) return;
      const keyed = e.sessionKey !== null;
      log.info({
        method: 'GET', path: '/v1/realtime', realtime: true, key: e.key ?? undefined, priority: e.priority ?? undefined,
        status: e.status, outcome: e.outcome, replica: e.replica ?? undefined, route: e.route ?? undefined, attempts: e.attempts,
        session: keyed ? sessionTag(e.sessionKey) : undefined, sessionSource: keyed ? e.sessionSource : undefined,
        protocol: e.protocol ?? undefined, protocolBy: e.protocolBy ?? undefined,
        closeCode: e.closeCode ?? undefined, closeReason: e.closeReason ?? undefined,
        openMs: e.openMs === null ? undefined : round(e.openMs), durationMs: round(e.durationMs),
        framesIn: e.framesIn, framesOut: e.framesOut, bytesIn: e.bytesIn, bytesOut: e.bytesOut, utterances: e.utterances,
        err: e.err ?? undefined,
      }, 'request');
    },
  };
}
