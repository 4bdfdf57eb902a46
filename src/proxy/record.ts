import type { Logger } from 'pino';
import { hash64 } from '../routing/hash.js';
import type { RequestIdentity, Router } from '../routing/types.js';
import { hopsOf, overheadOf, ttftOf, type HopClock } from '../telemetry/hop-clock.js';
import { HOPS, type Metrics } from '../telemetry/metrics.js';
import type { Outcome } from './forward.js';

const round = (v: number | null) => (v === null ? null : Math.round(v * 1000) / 1000);

function statusClass(status: number, aborted: boolean): string {
  if (aborted) return 'aborted';
  return status >= 100 ? `${Math.floor(status / 100)}xx` : 'none';
}

/** A short, stable, non-reversible tag of a session key for logs (never the key itself). */
export function sessionTag(key: string | null): string | null {
  return key === null ? null : hash64(key).toString(16).padStart(16, '0').slice(0, 12);
}

/**
 * Everything that happens once per request after it ended: hop metrics, TTFT, overhead, the
 * request counter, token counters, the router's observation and the one access log line.
 */
export function recordExchange(
  deps: { metrics: Metrics; log: Logger; router: Router },
  x: { method: string; path: string; identity: RequestIdentity; clock: HopClock; outcome: Outcome },
): void {
  const { metrics, log, router } = deps;
  const { clock, outcome, identity } = x;
  const hops = hopsOf(clock);
  for (const hop of HOPS) {
    const v = hops[hop];
    if (v !== null) metrics.hopDuration.observe({ hop }, v / 1000);
  }
  const ttft = outcome.answered ? ttftOf(clock) : null;
  const overhead = outcome.answered ? overheadOf(clock) : null;
  if (ttft !== null) metrics.ttft.observe({ route: outcome.reason }, ttft / 1000);
  if (overhead !== null) metrics.overhead.observe(overhead / 1000);
  const replica = outcome.replica ?? 'none';
  metrics.requests.inc({ replica, route: outcome.reason, code: statusClass(outcome.status, outcome.aborted) });
  const u = outcome.usage;
  if (u && outcome.replica) {
    if (u.promptTokens !== null) metrics.promptTokens.inc({ replica }, u.promptTokens);
    if (u.cachedTokens !== null) metrics.cachedTokens.inc({ replica }, u.cachedTokens);
  }
  if (outcome.answered && outcome.replica) {
    router.served(identity, {
      replica: outcome.replica,
      ok: outcome.status < 400,
      upstreamTtftMs: hops.upstream_first_token,
      promptTokens: u?.promptTokens ?? null,
      cachedTokens: u?.cachedTokens ?? null,
    });
  }
  log.info({
    method: x.method,
    path: x.path,
    status: outcome.status,
    replica: outcome.replica,
    route: outcome.reason,
    attempts: outcome.attempts,
    session: sessionTag(identity.sessionKey),
    sessionSource: identity.sessionKeySource,
    model: identity.model,
    stream: outcome.sse,
    ttftMs: round(ttft),
    overheadMs: round(overhead),
    hops: {
      parse: round(hops.parse), route: round(hops.route), queue: round(hops.queue), connect: round(hops.connect),
      upstream_headers: round(hops.upstream_headers), upstream_first_token: round(hops.upstream_first_token), stream: round(hops.stream),
    },
    promptTokens: u?.promptTokens ?? null,
    cachedTokens: u?.cachedTokens ?? null,
    completionTokens: u?.completionTokens ?? null,
    done: outcome.sse ? outcome.done : undefined,
    aborted: outcome.aborted || undefined,
    err: outcome.error ? outcome.error.openaiCode : undefined,
  }, 'request');
}
