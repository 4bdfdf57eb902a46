import type { Logger } from 'pino';
import { hash64 } from '../routing/hash.js';
import type { RequestIdentity, Router } from '../routing/types.js';
import { hopsOf, overheadOf, ttftOf, type HopClock } from '../telemetry/hop-clock.js';
import { HOPS, type RequestMetrics } from '../telemetry/metrics.js';
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
  deps: { requestMetrics: RequestMetrics; log: Logger; router: Router },
  x: { method: string; path: string; identity: RequestIdentity; clock: HopClock; outcome: Outcome },
): void {
  const { requestMetrics: m, log, router } = deps;
  const { clock, outcome, identity } = x;
  const hops = hopsOf(clock);
  for (let i = 0; i < HOPS.length; i++) {
    const v = hops[HOPS[i]];
    if (v !== null) m.hop[i].observe(v / 1000);
  }
  const ttft = outcome.answered ? ttftOf(clock) : null;
  const overhead = outcome.answered ? overheadOf(clock) : null;
  if (ttft !== null) m.ttft(outcome.reason).observe(ttft / 1000);
  if (overhead !== null) m.overhead.observe(overhead / 1000);
  const replica = outcome.replica ?? 'none';
  m.requests(replica, outcome.reason, statusClass(outcome.status, outcome.aborted)).inc();
  const u = outcome.usage;
  if (u && outcome.replica) {
    if (u.promptTokens !== null) m.promptTokens(replica).inc(u.promptTokens);
    if (u.cachedTokens !== null) m.cachedTokens(replica).inc(u.cachedTokens);
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
    // Flat numbers, not a nested object: pino serialises nested objects on a much slower path.
    parseMs: round(hops.parse),
    routeMs: round(hops.route),
    queueMs: round(hops.queue),
    connectMs: round(hops.connect),
    upstreamHeadersMs: round(hops.upstream_headers),
    upstreamFirstTokenMs: round(hops.upstream_first_token),
    streamMs: round(hops.stream),
    promptTokens: u?.promptTokens ?? null,
    cachedTokens: u?.cachedTokens ?? null,
    completionTokens: u?.completionTokens ?? null,
    done: outcome.sse ? outcome.done : undefined,
    aborted: outcome.aborted || undefined,
    err: outcome.error ? outcome.error.openaiCode : undefined,
  }, 'request');
}
