import type { Logger } from 'pino';
import type { ResolvedConfig } from './config/schema.js';
import { STATE_LOST_REASONS, type ResidencyObserver, type StateLostReason } from './routing/types.js';
import type { Metrics } from './telemetry/metrics.js';
import { throttle } from './telemetry/throttle.js';

/**
 * A stored response (Responses API) whose replica's state is lost or unknown: counted by reason
 * (every reason's series at 0 from start), and one warn line at most every 10 s.
 */
export function stateLostObserver(metrics: Metrics, log: Logger, onLostState: ResolvedConfig['responses']['onLostState']): (reason: StateLostReason, replica: string | null) => void {
  for (const reason of STATE_LOST_REASONS) metrics.stateLost.inc({ reason }, 0);
  const lostWarning = throttle(10_000);
  return (reason, replica) => {
    metrics.stateLost.inc({ reason });
    const suppressed = lostWarning();
    if (suppressed === null) return;
    const asUsual = reason === 'unknown' || reason === 'unconfirmed';
    log.warn({ reason, replica, action: asUsual ? 'routed as usual' : onLostState, suppressed },
      reason === 'unknown'
        ? 'stored response unknown to this gateway and the shared store: routed as usual, the replica may not hold it'
        : reason === 'unconfirmed'
          ? 'stored response not in this gateway\'s view and the shared store did not answer in time (responses.fetchMs): routed as usual'
          : 'stored response lost with its replica');
  };
}

/** What the router learns of each replica's cache, as metrics: predicted against served cached tokens, evictions, block mapping. */
export function residencyObserver(metrics: Metrics): ResidencyObserver {
  return {
    cachedTokens(replica, predicted, served) {
      metrics.cachedPredicted.inc({ replica }, predicted);
      metrics.cachedPredictedServed.inc({ replica }, served);
      if (predicted > served) metrics.cachedOverpredicted.inc({ replica }, predicted - served);
    },
    evicted: (replica, source, links) => metrics.residencyEvictions.inc({ replica, source }, links),
    learned: (replica, outcome) => metrics.kvBlockMapping.inc({ replica, outcome }),
  };
}
