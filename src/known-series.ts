import type { ShedCause } from './queue/limiter.js';
import { API_KEYS_FILE_REJECTIONS } from './edge/api-keys.js';
import { EJECTION_CAUSES } from './fleet/outlier.js';
import type { ColdReason } from './fleet/health.js';
import type { KvStreamObserver } from './fleet/kv-events/subscriber.js';
import { STORE_EVENTS, STORE_OPS } from './store/redis.js';
import { PRIORITY_CLASSES } from './queue/priority.js';
import { ROUTE_REASONS } from './routing/types.js';
import { HOPS, type Metrics } from './telemetry/metrics.js';
import { TRACE_DROP_REASONS } from './telemetry/tracing/export.js';
import { FAILURE_CAUSES } from './upstream/failures.js';

const SHED_CAUSES = ['queue_full', 'queue_timeout', 'deadline'] as const satisfies readonly ShedCause[];
const COLD_REASONS = ['restart', 'long_outage'] as const satisfies readonly ColdReason[];
const REPLAY_OUTCOMES = ['ok', 'failed', 'timeout', 'incomplete', 'overflow', 'none'] as const satisfies readonly Parameters<KvStreamObserver['replay']>[1][];
const EVICTION_SOURCES = ['feedback', 'events'] as const;

/**
 * Every series whose label values are known at start, created at 0: a dashboard panel or an
 * alert on rate() then reads 0, not "No data", until the first event (and sees that first one).
 * Series labelled by replica are made when the replica is first seen (`replica`).
 */
export function zeroKnownSeries(metrics: Metrics, retentionSeconds: () => number) {
  for (const where of ['global', 'replica']) for (const cause of SHED_CAUSES) metrics.shed.inc({ reason: `${where}_${cause}` }, 0);
  metrics.shed.inc({ reason: 'key_limit' }, 0);
  for (const reason of ['missing', 'invalid']) metrics.authFailures.inc({ reason }, 0);
  for (const reason of API_KEYS_FILE_REJECTIONS) metrics.apiKeysFileRejected.inc({ reason }, 0);
  for (const cause of EJECTION_CAUSES) metrics.ejectionsSkipped.inc({ cause }, 0);
  for (const where of ['tools', 'system', 'history']) metrics.prefixDrift.inc({ where }, 0);
  for (const outcome of ['resumed', 'failed']) metrics.resumes.inc({ outcome }, 0);
  for (const reason of TRACE_DROP_REASONS) metrics.traceSpansDropped.inc({ reason }, 0);
  for (const field of ['max_tokens', 'max_completion_tokens']) metrics.toolMaxTokensRaised.inc({ field }, 0);
  // The hop breakdown reads as zeros, not "No data", before the first request.
  for (const hop of HOPS) metrics.hopDuration.zero({ hop });
  for (const route of ROUTE_REASONS) metrics.ttft.zero({ route });
  // The dashboard's interactive vs batch panels, before the first request of each class.
  for (const cls of PRIORITY_CLASSES) {
    metrics.classTtft.zero({ class: cls });
    for (const code of ['2xx', '4xx', '5xx']) metrics.classRequests.inc({ class: cls, code }, 0);
  }
  // Also with the in-memory store (which never fails): the store panels read 0, not "No data".
  for (const store of ['sessions', 'responses']) {
    for (const op of STORE_OPS) metrics.storeErrors.inc({ store, op }, 0);
    for (const event of STORE_EVENTS) metrics.storeEvents.inc({ store, event }, 0);
  }
  return {
    replica(name: string) {
      for (const cause of FAILURE_CAUSES) {
        metrics.retries.inc({ replica: name, cause }, 0);
        metrics.streamErrors.inc({ replica: name, cause }, 0);
      }
      for (const cause of EJECTION_CAUSES) metrics.ejections.inc({ replica: name, cause }, 0);
      for (const cause of COLD_REASONS) metrics.warmStateForgotten.inc({ replica: name, cause }, 0);
      for (const what of ['models', 'metrics']) metrics.scrapeErrors.inc({ replica: name, what }, 0);
      for (const outcome of ['learned', 'unsupported', 'failed']) metrics.tokenRatioProbes.inc({ replica: name, outcome }, 0);
      metrics.clientAborts.inc({ replica: name }, 0);
      metrics.batchPrefillWaits.inc({ replica: name }, 0);
      metrics.promptTokens.inc({ replica: name }, 0);
      metrics.cachedTokens.inc({ replica: name }, 0);
      metrics.cachedPredicted.inc({ replica: name }, 0);
      metrics.cachedPredictedServed.inc({ replica: name }, 0);
      metrics.cachedOverpredicted.inc({ replica: name }, 0);
      for (const source of EVICTION_SOURCES) metrics.residencyEvictions.inc({ replica: name, source }, 0);
      // What routing believes before it has learnt anything of the replica (routing.options.prefixTtlMs);
      // the scrape overwrites it once routing has its own figure.
      metrics.retention.set({ replica: name }, retentionSeconds());
      // KV events, also where a replica publishes none: its panels then say so (stream not live), not "No data".
      metrics.kvEventLag.zero({ replica: name });
      metrics.kvEventGaps.inc({ replica: name }, 0);
      for (const outcome of REPLAY_OUTCOMES) metrics.kvEventReplays.inc({ replica: name, outcome }, 0);
      metrics.kvStreamLive.inc({ replica: name }, 0); // adds nothing to a stream already live
    },
  };
}
